// The whole-step byte plan (cost/gpt_step_comm.hpp) against the real trainer: mdtp::train runs one
// step of a small GPT in a grid of configurations — every TP mode, pipelines of 1, 2 and 4 stages
// under each schedule, data parallelism, ZeRO stages — and on EVERY rank the ledger of that step
// equals the plan of the rank's stage per (phase, group, op): calls, logical bytes, group size and
// bus bytes.  Also: the bucket plan the cost model derives from the configuration alone is the
// one the ZeRO engine builds from the real model's parameters, stage by stage.  Llama runs beside
// GPT-2 (grouped-query attention, SwiGLU, RMSNorm, no position table, tied and untied heads, under a
// pipeline and ZeRO-3): the same equalities, parameter names included.
//
// The CI form (tag [ci]) runs a dozen configurations at 8 ranks; the `slow` form runs the rest.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "io/results_file.hpp"
#include "mesh/mesh.hpp"
#include "modes/registry.hpp"
#include "train/step_comm_config.hpp"
#include "train/train_setup.hpp"
#include "train/trainer.hpp"
#include "zero/zero_layout.hpp"

using namespace mdtp;

namespace {

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

std::string key_name(const LedgerKey& k) {
  std::ostringstream os;
  os << k.phase << "/" << k.group << "/" << collective_name(k.op);
  return os.str();
}

struct GridCase {
  std::string label;
  TrainConfig config;
};

// A GPT of 4 blocks (heads 4, embd 32, sequence 8) on the shipped character corpus, one step.
TrainConfig base(TpMode mode, int tp, int pp, std::int64_t batch, int micro_batches,
                 ScheduleKind schedule = ScheduleKind::one_f_one_b) {
  TrainConfig t;
  t.spec.layout.mode = mode;
  t.spec.layout.tp = tp;
  t.spec.layout.pp = pp;
  t.spec.layout.schedule = schedule;
  t.spec.layout.micro_batches = micro_batches;
  t.spec.model = ModelShape{4, 32, 4, 8, 0};
  t.spec.global_batch = batch;
  t.steps = 1;
  t.spec.optimizer.kind = OptimizerKind::adamw;
  t.spec.optimizer.grad_clip = 1.0;
  t.spec.precision = precision_for(DType::f32);
  return t;
}

GridCase with(std::string label, TrainConfig t) { return GridCase{std::move(label), std::move(t)}; }

// The same run with a Llama of `kv` key/value heads and an MLP of 40 (not 4·hidden): the widths,
// parameter names and lists, RMSNorm, the missing position table and the (un)tied head all reach
// the plan.
TrainConfig llama(TrainConfig t, std::int64_t kv, bool tied = false) {
  t.spec.model.family = ModelFamily::llama;
  t.spec.model.kv_heads = kv;
  t.spec.model.ffn_hidden = 40;
  t.spec.model.tied_head = tied;
  return t;
}

// The same GPT-2 with an LM head of its own (Megatron-LM's --untie-embeddings-and-output-weights):
// lm_head.weight on the last stage, no embedding all-reduce between the first and the last.
TrainConfig untied(TrainConfig t) {
  t.spec.model.tied_head = false;
  return t;
}

// A schedule of two chunks per stage (zb-v and dualpipev in V order, dualpipe mirrored).
TrainConfig v_shaped(TrainConfig t) {
  t.spec.layout.chunks = 2;
  t.spec.layout.stage_mapping = stage_mapping_of(t.spec.layout.schedule);
  return t;
}

// ZeRO at `stage` with small buckets (several per unit), `steps` steps (the ledger is the last's).
TrainConfig zero(TrainConfig t, int stage, double bucket_mb = 0.004, bool keep = false, int steps = 1) {
  t.spec.zero.stage = stage;
  t.spec.zero.bucket_mb = bucket_mb;
  t.spec.zero.keep_parameters = keep;
  t.steps = steps;
  return t;
}

// Every mode; pp 1, 2 and 4 with gpipe, 1f1b, interleaved and zb-h1; dp 1, 2, 4 and 8; f32 and f64.
std::vector<GridCase> ci_grid() {
  std::vector<GridCase> g;
  g.push_back(with("none tp1 pp2 dp4 1f1b m2", base(TpMode::none, 1, 2, 8, 2)));
  g.push_back(with("1d tp2 pp2 dp2 1f1b m4", base(TpMode::d1, 2, 2, 8, 4)));
  g.push_back(with("1d tp2 pp2 dp2 zb-h1 m2 b2", base(TpMode::d1, 2, 2, 8, 2, ScheduleKind::zb_h1)));
  g.push_back(with("1d tp2 pp2 dp2 zb-v m2 zero3", zero(v_shaped(base(TpMode::d1, 2, 2, 8, 2, ScheduleKind::zb_v)), 3)));
  g.push_back(with("2d tp4 pp2 dp1 dualpipev m4 b2", v_shaped(base(TpMode::d2, 4, 2, 8, 4, ScheduleKind::dualpipev))));
  g.push_back(with("none tp1 pp2 dp4 zb-h2 m3 zero1", zero(base(TpMode::none, 1, 2, 12, 3, ScheduleKind::zb_h2), 1)));
  g.push_back(with("1d tp2 pp2 dp2 dualpipe m4 zero3",
                   zero(v_shaped(base(TpMode::d1, 2, 2, 8, 4, ScheduleKind::dualpipe)), 3)));
  g.push_back(with("1d-sp tp2 pp2 dp2 dualpipe m4 zero2",
                   zero(v_shaped(base(TpMode::d1_sp, 2, 2, 8, 4, ScheduleKind::dualpipe)), 2)));
  g.push_back(with("none tp1 pp4 dp2 dualpipe m8", v_shaped(base(TpMode::none, 1, 4, 16, 8, ScheduleKind::dualpipe))));
  g.push_back(with("1d-sp tp2 pp2 dp2 gpipe m2", base(TpMode::d1_sp, 2, 2, 4, 2, ScheduleKind::gpipe)));
  {
    TrainConfig t = base(TpMode::d1, 4, 2, 2, 2, ScheduleKind::interleaved);
    t.spec.layout.chunks = 2;
    g.push_back(with("1d tp4 pp2 dp1 interleaved v2 m2", t));
  }
  {
    TrainConfig t = base(TpMode::d1, 2, 4, 4, 4);
    t.spec.layout.pp_layers = {0, 2, 2, 0};
    g.push_back(with("1d tp2 pp4 dp1 1f1b m4 layers 0,2,2,0", t));
  }
  g.push_back(with("2d tp4 pp2 dp1 1f1b m2 b2", base(TpMode::d2, 4, 2, 4, 2)));
  {
    TrainConfig t = base(TpMode::d2, 4, 1, 4, 1);
    t.spec.precision = precision_for(DType::f64);
    g.push_back(with("2d tp4 pp1 dp2 f64", t));
  }
  {
    TrainConfig t = base(TpMode::d2p5, 8, 1, 4, 1);
    t.spec.layout.depth = 2;
    g.push_back(with("2.5d tp8 d2 pp1 dp1 b4", t));
  }
  g.push_back(with("3d tp8 pp1 dp1 b4", base(TpMode::d3, 8, 1, 4, 1)));
  g.push_back(with("none tp1 pp1 dp8", base(TpMode::none, 1, 1, 8, 1)));
  g.push_back(with("1d tp2 pp2 dp2 1f1b m2 zero1", zero(base(TpMode::d1, 2, 2, 8, 2), 1)));
  g.push_back(with("1d tp2 pp2 dp2 zb-h1 m2 zero2", zero(base(TpMode::d1, 2, 2, 8, 2, ScheduleKind::zb_h1), 2)));
  g.push_back(with("none tp1 pp1 dp8 zero3, 2 steps", zero(base(TpMode::none, 1, 1, 8, 1), 3, 0.004, false, 2)));
  g.push_back(with("1d-sp tp2 pp2 dp2 1f1b m2 zero3", zero(base(TpMode::d1_sp, 2, 2, 4, 2), 3)));
  g.push_back(with("2d tp4 pp1 dp2 zero3 keep, 2 steps", zero(base(TpMode::d2, 4, 1, 4, 1), 3, 0.004, true, 2)));
  {
    TrainConfig t = zero(base(TpMode::d1, 2, 2, 8, 2, ScheduleKind::zb_h1), 2);
    t.spec.zero.reduce_per_micro_batch = true;
    g.push_back(with("1d tp2 pp2 dp2 zb-h1 m2 zero2 per micro-batch", t));
  }
  {
    TrainConfig t = zero(base(TpMode::none, 1, 1, 16, 2), 3, 0.004, false, 2);
    t.spec.zero.reduce_per_micro_batch = true;
    g.push_back(with("none tp1 pp1 dp8 m2 zero3 per micro-batch, 2 steps", t));
  }
  {
    TrainConfig t = base(TpMode::d1_sp, 2, 2, 8, 2, ScheduleKind::zb_h1);
    t.spec.recompute = Recompute::full;
    g.push_back(with("1d-sp tp2 pp2 dp2 zb-h1 m2 recompute full", t));
  }
  {
    TrainConfig t = base(TpMode::d3, 8, 1, 4, 1);
    t.spec.recompute = Recompute::full;
    g.push_back(with("3d tp8 recompute full", t));
  }
  // Mixed precision: bf16 activations and values on the wire, f32 gradient sums (SUMMA's dW
  // reduces, 3D's reduce-scatter over the weight group, 2.5D's depth sums, ZeRO's buckets), or
  // bf16 gradient sums with --grad-reduce-dtype bf16.
  const auto bf16 = [](TrainConfig t, DType grads = DType::f32) {
    t.spec.precision = {DType::bf16, grads, {}};
    return t;
  };
  g.push_back(with("2d tp4 pp1 dp2 bf16 zero2", bf16(zero(base(TpMode::d2, 4, 1, 4, 1), 2))));
  g.push_back(with("3d tp8 bf16", bf16(base(TpMode::d3, 8, 1, 4, 1))));
  {
    TrainConfig t = bf16(base(TpMode::d2p5, 8, 1, 4, 1));
    t.spec.layout.depth = 2;
    g.push_back(with("2.5d tp8 d2 bf16", t));
  }
  g.push_back(with("1d-sp tp2 pp2 dp2 1f1b m2 bf16 zero3", bf16(zero(base(TpMode::d1_sp, 2, 2, 4, 2), 3))));
  g.push_back(with("1d tp2 pp1 dp4 bf16 grads bf16 zero1", bf16(zero(base(TpMode::d1, 2, 1, 8, 1), 1), DType::bf16)));
  {
    TrainConfig t = bf16(zero(base(TpMode::none, 1, 1, 8, 1), 2, 0.004));
    t.spec.zero.offload = true;
    g.push_back(with("none tp1 pp1 dp8 bf16 zero2 offload", t));
  }
  g.push_back(with("gpt2 untied 1d-sp tp2 pp2 dp2 1f1b m2 zero1", untied(zero(base(TpMode::d1_sp, 2, 2, 8, 2), 1))));
  // Llama: grouped-query attention (kv < heads), untied and tied heads, with a pipeline and ZeRO-3.
  g.push_back(with("llama kv2 1d tp2 pp2 dp2 1f1b m2 untied", llama(base(TpMode::d1, 2, 2, 8, 2), 2)));
  g.push_back(with("llama kv2 2d tp4 pp2 dp1 1f1b m2 tied", llama(base(TpMode::d2, 4, 2, 4, 2), 2, true)));
  g.push_back(with("llama kv2 1d-sp tp2 pp2 dp2 zb-v m2 zero3 untied",
                   llama(zero(v_shaped(base(TpMode::d1_sp, 2, 2, 8, 2, ScheduleKind::zb_v)), 3), 2)));
  g.push_back(with("llama kv1 none tp1 pp2 dp4 1f1b m2 zero3 tied", llama(zero(base(TpMode::none, 1, 2, 8, 2), 3), 1, true)));
  g.push_back(with("llama kv2 3d tp8 zero1 bf16", llama(bf16(zero(base(TpMode::d3, 8, 1, 4, 1), 1)), 2)));
  {
    TrainConfig t = llama(zero(base(TpMode::d2p5, 8, 1, 4, 1), 2), 2, true);
    t.spec.layout.depth = 2;
    g.push_back(with("llama kv2 2.5d tp8 d2 zero2 tied", t));
  }
  return g;
}

std::vector<GridCase> slow_grid() {
  std::vector<GridCase> g;
  g.push_back(with("1d tp2 pp2 dp2 gpipe m4", base(TpMode::d1, 2, 2, 8, 4, ScheduleKind::gpipe)));
  g.push_back(with("1d-sp tp2 pp2 dp2 zb-h1 m2", base(TpMode::d1_sp, 2, 2, 4, 2, ScheduleKind::zb_h1)));
  g.push_back(with("1d-sp tp4 pp2 dp1 1f1b m2", base(TpMode::d1_sp, 4, 2, 2, 2)));
  g.push_back(with("2d tp4 pp2 dp1 zb-h1 m2 b2", base(TpMode::d2, 4, 2, 4, 2, ScheduleKind::zb_h1)));
  g.push_back(with("2d tp4 pp2 dp1 gpipe m2 b2", base(TpMode::d2, 4, 2, 4, 2, ScheduleKind::gpipe)));
  {
    TrainConfig t = base(TpMode::none, 1, 4, 8, 4, ScheduleKind::interleaved);
    t.spec.model.layers = 8;
    t.spec.layout.chunks = 2;
    g.push_back(with("none tp1 pp4 dp2 interleaved v2 m4 layers 8", t));
  }
  {
    TrainConfig t = base(TpMode::d1, 2, 4, 8, 8, ScheduleKind::interleaved);
    t.spec.model.layers = 8;
    t.spec.layout.chunks = 2;
    t.spec.layout.group_size = 4;
    g.push_back(with("1d tp2 pp4 dp1 interleaved v2 N4 m8 layers 8", t));
  }
  g.push_back(with("1d tp2 pp1 dp4 m2", base(TpMode::d1, 2, 1, 8, 2)));
  g.push_back(with("1d tp4 pp1 dp2 f64", [] {
    TrainConfig t = base(TpMode::d1, 4, 1, 2, 1);
    t.spec.precision = precision_for(DType::f64);
    return t;
  }()));
  g.push_back(with("2d tp4 pp1 dp2 m2 b2", base(TpMode::d2, 4, 1, 8, 2)));
  g.push_back(with("2d tp4 pp1 dp2 zero1 25 MiB", zero(base(TpMode::d2, 4, 1, 4, 1), 1, 25.0)));
  // The worked example of docs/performance-model.md.
  g.push_back(with("1d tp2 pp2 dp2 1f1b m2 b2 zero1 25 MiB", zero(base(TpMode::d1, 2, 2, 8, 2), 1, 25.0)));
  g.push_back(with("2d tp4 pp1 dp2 m2 zero2", zero(base(TpMode::d2, 4, 1, 8, 2), 2)));
  g.push_back(with("3d tp8 dp1 zero2", zero(base(TpMode::d3, 8, 1, 4, 1), 2)));
  g.push_back(with("2.5d tp8 d2 dp1 zero3", [] {
    TrainConfig t = zero(base(TpMode::d2p5, 8, 1, 4, 1), 3);
    t.spec.layout.depth = 2;
    return t;
  }()));
  g.push_back(with("none tp1 pp2 dp4 gpipe m2 zero3", zero(base(TpMode::none, 1, 2, 8, 2, ScheduleKind::gpipe), 3)));
  g.push_back(with("none tp1 pp2 dp4 zb-h1 m4 zero3, 2 steps",
                   zero(base(TpMode::none, 1, 2, 16, 4, ScheduleKind::zb_h1), 3, 0.004, false, 2)));
  {
    TrainConfig t = zero(base(TpMode::none, 1, 2, 8, 2, ScheduleKind::interleaved), 3, 0.002);
    t.spec.layout.chunks = 2;
    g.push_back(with("none tp1 pp2 dp4 interleaved v2 m2 zero3", t));
    t.spec.zero.reduce_per_micro_batch = true;
    g.push_back(with("none tp1 pp2 dp4 interleaved v2 m2 zero3 per micro-batch", t));
  }
  {
    TrainConfig t = zero(base(TpMode::d2, 4, 1, 8, 2), 2);
    t.spec.zero.reduce_per_micro_batch = true;
    g.push_back(with("2d tp4 pp1 dp2 m2 zero2 per micro-batch", t));
  }
  {
    TrainConfig t = zero(base(TpMode::d1, 2, 2, 8, 2, ScheduleKind::interleaved), 3, 0.004, true);
    t.spec.layout.chunks = 2;
    g.push_back(with("1d tp2 pp2 dp2 interleaved v2 m2 zero3 keep", t));
  }
  {
    TrainConfig t = zero(base(TpMode::none, 1, 1, 8, 1), 2, 0.004);
    t.spec.zero.offload = true;
    g.push_back(with("none tp1 pp1 dp8 zero2 offload", t));
  }
  g.push_back(with("1d tp1 pp1 dp8 zero1 sgd", [] {
    TrainConfig t = zero(base(TpMode::d1, 1, 1, 8, 1), 1);
    t.spec.optimizer.kind = OptimizerKind::sgd;
    return t;
  }()));
  return g;
}

int stage_of_rank(const TrainPlan& plan) {
  const Topology topology(plan.mesh);
  return topology.rank_generator().coord(world_rank(), "pp");
}

// Runs one step and holds this rank's ledger equal to its stage's plan.  Only CHECKs (no REQUIRE):
// every rank must reach the next configuration's collectives.
void check_case(const GridCase& c) {
  const TrainResult result = train(c.config, MPI_COMM_WORLD);
  const TrainPlan plan = plan_training(c.config, world_size());
  const int stage = stage_of_rank(plan);
  std::map<LedgerKey, LedgerTotals> model;
  try {
    const cost::StepCommPlan step = cost::plan_step_comm(step_comm_config(plan), stage);
    model = step.totals();
    // MDTP_STEP_COMM_PRINT=1: the plan of each stage's first rank beside its ledger (the docs'
    // worked example is printed this way).
    if (std::getenv("MDTP_STEP_COMM_PRINT") && plan.mesh.tp * plan.dp() > 0 &&
        world_rank() % (world_size() / plan.mesh.pp) == 0) {
      std::ostringstream os;
      os << "==== " << c.label << ", stage " << stage << " (world rank " << world_rank() << ")\n"
         << cost::format_step_comm(step) << "ledger:\n";
      for (const auto& [key, m] : result.ledger)
        os << "  " << key_name(key) << " calls " << m.calls << " bytes " << m.logical_bytes << "\n";
      std::cerr << os.str() << std::flush;
    }
  } catch (const std::exception& e) {
    FAIL_CHECK("rank " << world_rank() << ": the plan refused the configuration: " << e.what());
    return;
  }
  const std::map<LedgerKey, LedgerTotals>& measured = result.ledger;
  CHECK(!measured.empty());
  std::int64_t measured_bytes = 0, model_bytes = 0;
  for (const auto& [key, m] : measured) {
    INFO(c.label << ", rank " << world_rank() << " (stage " << stage << "): the ledger has " << key_name(key) << " ("
                 << m.calls << " calls, " << m.logical_bytes << " bytes)");
    CHECK(model.count(key) == 1);
    measured_bytes += m.logical_bytes;
  }
  for (const auto& [key, p] : model) {
    INFO(c.label << ", rank " << world_rank() << " (stage " << stage << "): " << key_name(key) << " planned "
                 << p.calls << " calls, " << p.logical_bytes << " bytes");
    model_bytes += p.logical_bytes;
    const auto found = measured.find(key);
    CHECK(found != measured.end());
    if (found == measured.end()) continue;
    const LedgerTotals& m = found->second;
    CHECK(m.calls == p.calls);
    CHECK(m.logical_bytes == p.logical_bytes);
    CHECK(m.group_size == p.group_size);
    CHECK(std::abs(m.bus_bytes - p.bus_bytes) <= 1e-9 * std::max(1.0, p.bus_bytes));
  }
  CHECK(measured_bytes == model_bytes);
  CHECK(model_bytes > 0);
  // Memory too: what every category holds equals the bucket plan's model, and the activations
  // theirs, on every rank.
  for (std::size_t i = 0; i < result.memory_held.size(); ++i) {
    if (result.memory_model[i].second < 0) continue;
    INFO(c.label << ", rank " << world_rank() << ": memory " << mem_category_name(result.memory_held[i].first));
    CHECK(result.memory_held[i].second == result.memory_model[i].second);
  }
  INFO(c.label << ": activation and gradient peaks against their models");
  CHECK(result.kept_activations.equal_on_every_rank);
}

void run_grid(const std::vector<GridCase>& grid) {
  for (const GridCase& c : grid) {
    // SECTION-free: each configuration is one collective run, checked on every rank.
    INFO("configuration " << c.label);
    check_case(c);
  }
}

}  // namespace

TEST_CASE("The ledger of a whole training step equals the plan on every rank", "[step_comm][ci]") {
  if (world_size() != 8) return;
  run_grid(ci_grid());
}

TEST_CASE("The ledger of a whole training step equals the plan on every rank: more configurations",
          "[step_comm][slow]") {
  if (world_size() != 8) return;
  run_grid(slow_grid());
}

TEST_CASE("The bucket plan derived from the configuration is the ZeRO engine's, on every stage", "[step_comm][ci]") {
  if (world_size() != 8) return;
  struct Case {
    const char* label;
    TrainConfig config;
    double bucket_mb;
    int stage;
  };
  std::vector<Case> cases;
  for (int zero : {1, 3}) {
    cases.push_back({"1d tp2 pp2 dp2", base(TpMode::d1, 2, 2, 8, 2), 0.004, zero});
    cases.push_back({"llama kv2 1d tp2 pp2 dp2 untied", llama(base(TpMode::d1, 2, 2, 8, 2), 2), 0.004, zero});
    cases.push_back({"llama kv2 2d tp4 pp2 tied", llama(base(TpMode::d2, 4, 2, 4, 2), 2, true), 0.002, zero});
    cases.push_back({"2d tp4 pp2", base(TpMode::d2, 4, 2, 4, 2), 0.002, zero});
    cases.push_back({"gpt2 untied 2d tp4 pp2", untied(base(TpMode::d2, 4, 2, 4, 2)), 0.002, zero});
    cases.push_back({"3d tp8", base(TpMode::d3, 8, 1, 4, 1), 0.003, zero});
    TrainConfig interleaved = base(TpMode::d1_sp, 2, 2, 4, 2, ScheduleKind::interleaved);
    interleaved.spec.layout.chunks = 2;
    cases.push_back({"1d-sp tp2 pp2 dp2 interleaved v2", interleaved, 25.0, zero});
    TrainConfig p25 = base(TpMode::d2p5, 8, 1, 4, 1);
    p25.spec.layout.depth = 2;
    cases.push_back({"2.5d tp8 d2", p25, 0.002, zero});
  }
  for (const Case& c : cases) {
    INFO(c.label << " zero " << c.stage << " bucket " << c.bucket_mb << " MiB, rank " << world_rank());
    const TrainPlan plan = plan_training(c.config, world_size());
    CommLedger ledger;
    std::unique_ptr<Backend> backend = make_host_backend();
    Mesh mesh(plan.mesh, MPI_COMM_WORLD, ledger);
    auto mode = make_tp_mode(c.config.spec.layout.mode, TpContext{mesh, *backend, c.config.spec.precision.params, c.config.spec.seed, {}});
    const int stage = mesh.comm("pp").rank();
    std::vector<UnitRange> chunks;
    for (const UnitSpan& u : plan.partition.stage_units(stage)) chunks.push_back(UnitRange{u.first, u.last});
    GptModel model(*mode, plan.spec.model, plan.micro_batch, chunks);
    ZeroConfig zero;
    zero.stage = c.stage;
    zero.bucket_mb = c.bucket_mb;
    const ZeroLayout layout(model, mesh, zero);

    cost::StepCommConfig sc = step_comm_config(plan);
    sc.spec.zero.stage = c.stage;
    sc.spec.zero.bucket_mb = c.bucket_mb;
    const std::vector<BucketInput> derived = cost::stage_parameters(sc, stage);
    const BucketPlan planned = cost::stage_bucket_plan(sc, stage);
    const BucketPlan& engine = layout.plan();

    CHECK(derived.size() == layout.params().size());
    for (std::size_t i = 0; i < std::min(derived.size(), layout.params().size()); ++i) {
      const Parameter& p = *layout.params()[i].param;
      INFO("parameter " << i << ": derived " << derived[i].name << ", model " << p.name);
      CHECK(derived[i].name == p.name);
      CHECK(derived[i].numel == p.value.numel());
      CHECK(derived[i].decays == p.decays);
      CHECK(derived[i].dtype == p.value.dtype());
      CHECK(derived[i].unit == layout.unit(i));
    }
    CHECK(planned.buckets.size() == engine.buckets.size());
    CHECK(planned.buckets.size() >= 2);
    for (std::size_t b = 0; b < std::min(planned.buckets.size(), engine.buckets.size()); ++b) {
      INFO("bucket " << b);
      CHECK(planned.buckets[b].partial_groups == engine.buckets[b].partial_groups);
      CHECK(planned.buckets[b].decays == engine.buckets[b].decays);
      CHECK(planned.buckets[b].padded == engine.buckets[b].padded);
      CHECK(planned.buckets[b].shard == engine.buckets[b].shard);
      CHECK(planned.buckets[b].units == engine.buckets[b].units);
      CHECK(planned.buckets[b].slots.size() == engine.buckets[b].slots.size());
      for (std::size_t s = 0; s < std::min(planned.buckets[b].slots.size(), engine.buckets[b].slots.size()); ++s) {
        CHECK(planned.buckets[b].slots[s].param == engine.buckets[b].slots[s].param);
        CHECK(planned.buckets[b].slots[s].offset == engine.buckets[b].slots[s].offset);
      }
    }
  }
}

TEST_CASE("The results file's ledger table holds the model beside the measurement", "[step_comm][ci]") {
  if (world_size() != 8) return;
  // One path for all ranks: rank 0's pid.
  long pid = world_rank() == 0 ? static_cast<long>(getpid()) : 0;
  MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("mdtp-step-comm-" + std::to_string(pid) + ".h5")).string();
  TrainConfig t = zero(base(TpMode::d1, 2, 2, 8, 2), 2, 0.004, false, 2);
  t.out = path;
  std::ostringstream progress;
  train(t, MPI_COMM_WORLD, &progress);
  MPI_Barrier(MPI_COMM_WORLD);
  const std::vector<std::string> runs = list_runs(path);
  CHECK(runs.size() == 1);
  if (runs.size() == 1) {
    const Table ledger = read_table(path, "/runs/" + runs[0] + "/ledger");
    const auto& steps = std::get<std::vector<std::int64_t>>(ledger.column("step"));
    const auto& calls = std::get<std::vector<double>>(ledger.column("calls"));
    const auto& bytes = std::get<std::vector<double>>(ledger.column("logical_bytes"));
    const auto& model_calls = std::get<std::vector<double>>(ledger.column("model_calls"));
    const auto& model_bytes = std::get<std::vector<double>>(ledger.column("model_logical_bytes"));
    CHECK(ledger.rows() >= 2 * 8);  // two steps of forward, backward, pipeline, grad-sync, loss, optimizer keys
    CHECK(std::count(steps.begin(), steps.end(), 1) == std::count(steps.begin(), steps.end(), 2));
    for (std::size_t i = 0; i < ledger.rows(); ++i) {
      INFO("row " << i);
      CHECK(calls[i] > 0);
      CHECK(model_calls[i] == calls[i]);
      CHECK(model_bytes[i] == bytes[i]);
    }
    // Rank 0's progress: the comparison in one line.
    if (world_rank() == 0) {
      const std::string keys = std::to_string(ledger.rows() / 2);
      CHECK(progress.str().find(keys + " of " + keys + " (phase, group, op) equal the model") != std::string::npos);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::filesystem::remove(path);
}
