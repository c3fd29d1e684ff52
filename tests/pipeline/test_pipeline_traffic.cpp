// The pipeline's point-to-point traffic in the ledger (phase "pipeline") against what the plan
// implies (cost::plan_step_comm: the schedule's transfers × the residual shard of the cost
// model's Geometry, with the 1D scatter/gather over tp), to the byte and the call, per rank and
// per (group, op) — for a step of the executor alone (pp = 2 in both directions between one pair
// of ranks, pp = 4 with the interleaved wrap-around, every mode, f32 and f64) and for the rows the
// trainer writes to its results file (the largest rank's calls and bytes per step).
#include <catch2/catch.hpp>
#include <algorithm>
#include <iostream>
#include <random>
#include <tuple>
#include <cstring>

#include <fmt/format.h>

#include "comm/ledger.hpp"
#include "cost/gpt_step_comm.hpp"
#include "support/gpt_harness.hpp"
#include "io/results_file.hpp"
#include "io/token_data.hpp"
#include "mesh/mesh.hpp"
#include "modes/registry.hpp"
#include "pipeline/executor.hpp"
#include "plan/unit_passes.hpp"
#include "zero/zero_engine.hpp"
#include "plan/stage_partition.hpp"
#include "run/root_task.hpp"
#include "train/trainer.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

struct TrafficCase {
  TpMode mode = TpMode::none;
  int tp = 1, depth = 1, pp = 2;
  ScheduleKind schedule = ScheduleKind::one_f_one_b;
  int m = 2, chunks = 1;
  DType dtype = DType::f64;
  std::string label() const {
    return fmt::format("{} tp={} pp={} {} m={} v={} {}", tp_mode_name(mode), tp, pp, schedule_name(schedule), m,
                       chunks, dtype_name(dtype));
  }
};

std::vector<TrafficCase> cases_for(int world) {
  using S = ScheduleKind;
  auto c = [](TpMode mode, int tp, int depth, int pp, S s, int m, int v, DType d) {
    TrafficCase x;
    x.mode = mode, x.tp = tp, x.depth = depth, x.pp = pp, x.schedule = s, x.m = m, x.chunks = v, x.dtype = d;
    return x;
  };
  switch (world) {
    case 4:
      return {c(TpMode::d1, 2, 1, 2, S::one_f_one_b, 3, 1, DType::f32),  // scatter/gather, both directions
              c(TpMode::d1_sp, 2, 1, 2, S::zb_h1, 2, 1, DType::f64),
              c(TpMode::none, 1, 1, 4, S::interleaved, 4, 2, DType::f32),  // the wrap-around 3 → 0
              c(TpMode::none, 1, 1, 2, S::gpipe, 3, 1, DType::f64),
              c(TpMode::d1, 2, 1, 2, S::zb_v, 2, 2, DType::f32),           // V: the bottom hands over in place
              c(TpMode::none, 1, 1, 4, S::dualpipev, 8, 2, DType::f64),
              c(TpMode::none, 1, 1, 4, S::dualpipe, 8, 2, DType::f32)};     // two routes
    case 8:
      return {c(TpMode::d2, 4, 1, 2, S::interleaved, 2, 2, DType::f32),
              c(TpMode::d2p5, 4, 1, 2, S::zb_h1, 3, 1, DType::f64),
              c(TpMode::d1, 2, 1, 4, S::interleaved, 4, 2, DType::f64),  // scatter/gather over the wrap-around
              c(TpMode::d1, 2, 1, 2, S::gpipe, 2, 1, DType::f32),      // dp = 2
              c(TpMode::d2, 4, 1, 2, S::dualpipev, 4, 2, DType::f64),
              c(TpMode::d1, 2, 1, 4, S::dualpipe, 8, 2, DType::f64)};  // scatter/gather on both routes
    case 16:
      return {c(TpMode::d3, 8, 1, 2, S::one_f_one_b, 2, 1, DType::f32)};
    default: return {};
  }
}

constexpr std::int64_t kMicroBatch = 4;  // sequences per micro-batch (3D splits them over q² = 4): b·T = 16 rows
const ModelShape kShape{8, 24, 4, 4, 19};

// The calls of `stage` in phase "pipeline" the whole-step plan implies, totalled per (phase,
// group, op) as the ledger totals them.
std::map<LedgerKey, LedgerTotals> planned(const TrafficCase& c, int stage, int world) {
  cost::StepCommConfig sc;
  ParallelLayout& l = sc.spec.layout;
  sc.spec.model = kShape;
  l.mode = c.mode, l.tp = c.tp, l.depth = c.depth, l.pp = c.pp, l.dp = world / (c.tp * c.pp);
  l.schedule = c.schedule, l.micro_batches = c.m, l.chunks = c.chunks;
  l.stage_mapping = stage_mapping_of(c.schedule);
  sc.spec.global_batch = kMicroBatch * l.micro_batches * l.dp;
  sc.spec.precision = precision_for(c.dtype);
  std::map<LedgerKey, LedgerTotals> out;
  for (const auto& [key, totals] : cost::plan_step_comm(sc, stage).totals())
    if (key.phase == "pipeline") out[key] = totals;
  return out;
}

std::map<LedgerKey, LedgerTotals> recorded(const CommLedger& ledger) {
  std::map<LedgerKey, LedgerTotals> out;
  for (const auto& [key, totals] : ledger.summary())
    if (key.phase == "pipeline") out[key] = totals;
  return out;
}

}  // namespace

TEST_CASE("the pipeline's p2p bytes in the ledger are the plan's, to the byte", "[pipeline][ledger]") {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::vector<TrafficCase> cases = cases_for(world);
  if (cases.empty()) SUCCEED("no case at this world size");
  for (const TrafficCase& c : cases) {
    DYNAMIC_SECTION(c.label()) {
      const MeshConfig mesh_config{world, c.tp, c.pp, 1, "tp-cp-dp-pp", c.mode, c.depth, 0, stage_mapping_of(c.schedule)};
      CommLedger ledger;
      std::unique_ptr<Backend> backend = make_host_backend();
      Mesh mesh(mesh_config, MPI_COMM_WORLD, ledger);
      auto mode = make_tp_mode(c.mode, TpContext{mesh, *backend, c.dtype, 7, {}});
      const StagePartition partition(static_cast<int>(kShape.layers), c.pp, c.chunks, {}, stage_mapping_of(c.schedule));
      const Schedule schedule = make_schedule(c.schedule, c.pp, c.m, c.chunks);
      const int stage = mesh.comm("pp").rank();
      std::vector<UnitRange> chunks;
      for (const UnitSpan& u : partition.stage_units(stage)) chunks.push_back(UnitRange{u.first, u.last});
      GptModel model(*mode, kShape, kMicroBatch, chunks, "dp");
      PipelineExecutor executor(model, mesh, schedule, stage);

      const TokenBatch tokens = random_batch(kShape, kMicroBatch * c.m, 5);
      const std::size_t n = static_cast<std::size_t>(kMicroBatch * kShape.seq);
      std::vector<MicroBatch> mbs;
      for (int i = 0; i < c.m; ++i)
        mbs.push_back(MicroBatch{std::span<const std::int32_t>(tokens.inputs).subspan(i * n, n),
                                 std::span<const std::int32_t>(tokens.targets).subspan(i * n, n), i});
      ledger.clear();
      model.zero_gradients();
      executor.run_step(mbs, model.loss_scale(c.m));

      const auto want = planned(c, stage, world);
      const auto got = recorded(ledger);
      REQUIRE(!want.empty());
      CHECK(got.size() == want.size());
      for (const auto& [key, w] : want) {
        INFO("stage " << stage << " group " << key.group << " op " << collective_name(key.op));
        REQUIRE(got.count(key) == 1);
        CHECK(got.at(key).calls == w.calls);
        CHECK(got.at(key).logical_bytes == w.logical_bytes);
        CHECK(got.at(key).group_size == w.group_size);
      }
      if (rank == 0)
        for (const auto& [key, w] : want)
          std::cout << fmt::format("[pipeline traffic] {} stage 0: {} {} x{} = {} bytes\n", c.label(), key.group,
                                   collective_name(key.op), w.calls, w.logical_bytes);
    }
  }
}

TEST_CASE("the trainer's ledger table holds the plan's pipeline traffic per step", "[pipeline][ledger][train]") {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const std::vector<TrafficCase> cases = cases_for(world);
  if (cases.empty()) {
    SUCCEED("no case at this world size");
    return;
  }
  const TrafficCase c = cases.front();
  static const SharedTempDir dir("mdtp-pipeline-traffic-");
  const std::string data = dir.path() + "/tokens.h5", out = dir.path() + "/results.h5";
  const int dp = world / (c.tp * c.pp);
  run::run_on_root(MPI_COMM_WORLD, [&] {
    const std::int64_t rows = 2 * dp * c.m * kMicroBatch;
    const TokenBatch b = random_batch(kShape, rows, 9);
    write_token_file(data, TokenData{rows, kShape.seq, b.inputs, b.targets, kShape.vocab, data});
  });
  TrainConfig t;
  t.spec.layout.mode = c.mode;
  t.spec.layout.tp = c.tp;
  t.spec.layout.depth = c.depth;
  t.spec.layout.pp = c.pp;
  t.spec.layout.schedule = c.schedule;
  t.spec.layout.stage_mapping = stage_mapping_of(c.schedule);
  t.spec.layout.micro_batches = c.m;
  t.spec.layout.chunks = c.chunks;
  t.spec.model = kShape;
  t.spec.global_batch = dp * c.m * kMicroBatch;
  t.steps = 2;
  t.spec.precision = precision_for(c.dtype);
  t.data = data;
  t.out = out;
  train(t, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);

  // The table holds the largest rank's calls and bytes per (step, phase, group, op).
  std::map<std::pair<std::string, std::string>, std::pair<double, double>> want;
  for (int stage = 0; stage < c.pp; ++stage)
    for (const auto& [key, w] : planned(c, stage, world)) {
      auto& [calls, bytes] = want[{key.group, collective_name(key.op)}];
      calls = std::max(calls, static_cast<double>(w.calls));
      bytes = std::max(bytes, static_cast<double>(w.logical_bytes));
    }
  const std::vector<std::string> runs = list_runs(out);
  REQUIRE(runs.size() == 1);
  const Table ledger = read_table(out, "/runs/" + runs[0] + "/ledger");
  const auto& step = std::get<std::vector<std::int64_t>>(ledger.column("step"));
  const auto& phase = std::get<std::vector<std::string>>(ledger.column("phase"));
  const auto& group = std::get<std::vector<std::string>>(ledger.column("group"));
  const auto& op = std::get<std::vector<std::string>>(ledger.column("op"));
  const auto& calls = std::get<std::vector<double>>(ledger.column("calls"));
  const auto& bytes = std::get<std::vector<double>>(ledger.column("logical_bytes"));
  for (std::int64_t s : {1, 2}) {
    std::size_t rows = 0;
    for (std::size_t i = 0; i < phase.size(); ++i) {
      if (step[i] != s || phase[i] != "pipeline") continue;
      INFO("step " << s << " group " << group[i] << " op " << op[i]);
      ++rows;
      REQUIRE(want.count({group[i], op[i]}) == 1);
      CHECK(calls[i] == want.at({group[i], op[i]}).first);
      CHECK(bytes[i] == want.at({group[i], op[i]}).second);
    }
    CHECK(rows == want.size());
  }
}

TEST_CASE("DualPipe holds two copies: stage r's parameters are 1F1B's stages r and p − 1 − r", "[pipeline][memory]") {
  // Computed from the configuration alone (cost::stage_parameters, the plan the ZeRO engine's
  // held bytes are held to), in every mode, on a 4-stage pipeline: the mirrored stage holds the
  // union of the two round-robin stages' units — the embedding and the head on both end stages,
  // with one wte there (no head copy) — and every parameter is partial over `mirror`.
  for (const auto& [mode, tp, depth] : std::vector<std::tuple<TpMode, int, int>>{
           {TpMode::none, 1, 1}, {TpMode::d1, 2, 1}, {TpMode::d1_sp, 2, 1}, {TpMode::d2, 4, 1}, {TpMode::d2p5, 8, 2},
           {TpMode::d3, 8, 1}}) {
    auto config = [&](ScheduleKind schedule) {
      cost::StepCommConfig sc;
      ParallelLayout& l = sc.spec.layout;
      sc.spec.model = kShape;
      l.mode = mode, l.tp = tp, l.depth = depth, l.pp = 4, l.dp = 1;
      l.schedule = schedule, l.micro_batches = 8, l.chunks = fixed_chunks(schedule);
      l.stage_mapping = stage_mapping_of(schedule);
      sc.spec.global_batch = kMicroBatch * l.micro_batches;
      return sc;
    };
    const cost::StepCommConfig dual = config(ScheduleKind::dualpipe), single = config(ScheduleKind::one_f_one_b);
    auto elements = [](const std::vector<BucketInput>& ps, bool skip_head_wte) {
      std::int64_t n = 0;
      for (const BucketInput& p : ps)
        if (!(skip_head_wte && p.name == "transformer.wte.weight" && p.unit != 0)) n += p.numel;
      return n;
    };
    for (int r = 0; r < 4; ++r) {
      INFO(tp_mode_name(mode) << " stage " << r);
      const std::vector<BucketInput> mine = cost::stage_parameters(dual, r);
      // 1F1B's last stage carries a wte copy for its head; DualPipe's end stages read their own.
      const std::int64_t want = elements(cost::stage_parameters(single, r), true) +
                                elements(cost::stage_parameters(single, 3 - r), true);
      CHECK(elements(mine, false) == want);
      for (const BucketInput& p : mine) CHECK(std::count(p.partial_groups.begin(), p.partial_groups.end(), "mirror") == 1);
    }
  }
}

TEST_CASE("DualPipe's two copies of every parameter stay bitwise equal, at ZeRO 0, 1 and 3", "[pipeline][zero]") {
  // Mirror stages r and p − 1 − r run the same positions for different micro-batches; their
  // gradients are summed over `mirror`, so after every AdamW step (with clipping) the two copies
  // must hold the same bits — compared here element by element, through the engine's full
  // (gathered) values.
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  struct MirrorCase {
    TpMode mode;
    int tp, pp;
  };
  std::vector<MirrorCase> cases;
  if (world == 4) cases = {{TpMode::none, 1, 2}, {TpMode::none, 1, 4}};
  if (world == 8) cases = {{TpMode::d1, 2, 2}, {TpMode::d2, 4, 2}};
  if (cases.empty()) {
    SUCCEED("no case at this world size");
    return;
  }
  for (const MirrorCase& c : cases)
    for (const int zero : {0, 1, 3}) {
      const int dp = world / (c.tp * c.pp), m = 2 * c.pp;
      if (zero > 0 && dp == 1) continue;
      DYNAMIC_SECTION(tp_mode_name(c.mode) << " tp=" << c.tp << " pp=" << c.pp << " dp=" << dp << " zero " << zero) {
        const Schedule schedule = make_schedule(ScheduleKind::dualpipe, c.pp, m);
        MeshConfig mesh_config{world, c.tp, c.pp, 1, "tp-cp-dp-pp", c.mode, 1, 0, StageMapping::mirrored};
        CommLedger ledger;
        std::unique_ptr<Backend> backend = make_host_backend();
        Mesh mesh(mesh_config, MPI_COMM_WORLD, ledger);
        auto mode = make_tp_mode(c.mode, TpContext{mesh, *backend, DType::f64, 7, {}, zero == 3});
        const StagePartition partition(static_cast<int>(kShape.layers), c.pp, 2, {}, StageMapping::mirrored);
        const int stage = mesh.comm("pp").rank();
        std::vector<UnitRange> chunks;
        for (const UnitSpan& u : partition.stage_units(stage)) chunks.push_back(UnitRange{u.first, u.last});
        GptModel model(*mode, kShape, kMicroBatch, chunks, "dp");
        model.sum_copies_over("mirror");
        PipelineExecutor executor(model, mesh, schedule, stage);
        ZeroConfig zc;
        zc.stage = zero;
        zc.bucket_mb = 0.004;
        OptimizerSpec opt;
        opt.lr = 1e-2;
        opt.grad_clip = 0.05;
        ZeroEngine engine(zc, opt, model, mesh, *backend);
        engine.set_pass_order(stage_unit_passes(schedule, partition, stage));
        const int replica = mesh.comm("dp").rank();
        for (int step = 0; step < 3; ++step) {
          const TokenBatch tokens = random_batch(kShape, kMicroBatch * m, 100 * step + replica);
          const std::size_t n = static_cast<std::size_t>(kMicroBatch * kShape.seq);
          std::vector<MicroBatch> mbs;
          for (int i = 0; i < m; ++i)
            mbs.push_back(MicroBatch{std::span<const std::int32_t>(tokens.inputs).subspan(i * n, n),
                                     std::span<const std::int32_t>(tokens.targets).subspan(i * n, n), i});
          engine.begin_step();
          executor.run_step(mbs, model.loss_scale(m));
          engine.finish_gradients();
          engine.step();
        }
        // Every value of this stage, in the (identical) parameter order of both copies.
        std::vector<double> mine;
        for (std::size_t i = 0; i < engine.parameters().size(); ++i) {
          const std::vector<double> v = engine.gather_full(i, ZeroTensor::value);
          mine.insert(mine.end(), v.begin(), v.end());
        }
        Communicator& mirror = mesh.comm("mirror");
        REQUIRE(mirror.size() == 2);
        Tensor local = backend->from_f64(mine, {static_cast<std::int64_t>(mine.size())}, DType::f64, MemCategory::other);
        Tensor both = backend->zeros({2 * static_cast<std::int64_t>(mine.size())}, DType::f64, MemCategory::other);
        mirror.all_gather(local, both);
        const std::vector<double> all = backend->to_f64(both);
        std::size_t differ = 0;
        for (std::size_t k = 0; k < mine.size(); ++k)
          if (std::memcmp(&all[k], &all[mine.size() + k], sizeof(double)) != 0) ++differ;
        INFO("stage " << stage << ": " << mine.size() << " values, " << differ << " differ from the mirror copy");
        CHECK(!mine.empty());
        CHECK(differ == 0);
      }
    }
}
