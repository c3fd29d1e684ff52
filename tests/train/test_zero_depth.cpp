// ZeRO over dp × depth in 2.5D (docs/zero.md §5): at stages 1–3 the weights partial over tp.dep
// are sharded over the combined group dp-tp.dep, so one reduce-scatter replaces the depth
// all-reduce and the dp reduce-scatter, and each rank keeps 1/(dp·d) of their optimizer state.
// Through mdtp::train in f64, against stage 0 (which all-reduces over tp.dep) on the same mesh:
//  - the first step's reduced gradients within 1e-13, the parameters after three AdamW steps
//    within 1e-10, with and without clipping, offload and keep-params included;
//  - bytes held per category equal the bucket plan's model on every rank, and the optimizer state
//    is below what sharding over dp alone holds (the plan without the fold, computed here);
//  - the ledger equals the whole-step plan (cost/gpt_step_comm) per (phase, group, op) on every
//    rank, and it holds reduce-scatters over dp-tp.dep and no grad-sync all-reduce over tp.dep.
// 2.5D with q = 1 (tp = d) gives small meshes: d 2 × dp 2 on 4 ranks, d 2 × dp 3 on 6 (no bucket
// divides by 6), pp 2 under 1f1b and zb-h1 on 8; q = 2, d = 2 (tp 8) at dp 1 on 8 ranks and at
// dp 2 on 16 (label slow).
#include <catch2/catch.hpp>

#include <cmath>
#include <iostream>

#include <fmt/format.h>

#include "cost/gpt_step_comm.hpp"
#include "cost/zero.hpp"
#include "io/h5_file.hpp"
#include "file_error.hpp"
#include "mesh/topology.hpp"
#include "support/gpt_harness.hpp"
#include "plan/bucket_memory.hpp"
#include "train/step_comm_config.hpp"
#include "train/train_setup.hpp"
#include "train/trainer.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

struct DepthCase {
  std::string label;
  int tp = 2, depth = 2, pp = 1;
  ScheduleKind schedule = ScheduleKind::one_f_one_b;
  int micro_batches = 1;
};

std::vector<DepthCase> depth_cases(int world) {
  switch (world) {
    case 4: return {{"2.5d q1 d2 dp2", 2, 2, 1, ScheduleKind::one_f_one_b, 2}};
    case 6: return {{"2.5d q1 d2 dp3", 2, 2, 1, ScheduleKind::one_f_one_b, 1}};
    case 8:
      return {{"2.5d q2 d2 dp1", 8, 2, 1, ScheduleKind::one_f_one_b, 1},
              {"2.5d q1 d2 pp2 1f1b dp2", 2, 2, 2, ScheduleKind::one_f_one_b, 2},
              {"2.5d q1 d2 pp2 zb-h1 dp2", 2, 2, 2, ScheduleKind::zb_h1, 2}};
    case 16: return {{"2.5d q2 d2 dp2", 8, 2, 1, ScheduleKind::one_f_one_b, 2}};
    default: return {};
  }
}

TrainConfig config_for(const DepthCase& c, int world) {
  TrainConfig t;
  t.spec.layout.mode = TpMode::d2p5;
  t.spec.layout.tp = c.tp;
  t.spec.layout.depth = c.depth;
  t.spec.layout.pp = c.pp;
  t.spec.layout.schedule = c.schedule;
  t.spec.layout.micro_batches = c.micro_batches;
  t.spec.model = ModelShape{2, 32, 4, 16, 0};  // vocabulary from the shipped corpus
  const int dp = world / (c.tp * c.pp);
  t.spec.global_batch = 4 * c.depth * dp;  // the depth slabs split a replica's rows: d · dp · m divides it
  t.steps = 3;
  t.spec.optimizer.lr = 2e-2;
  t.spec.precision = precision_for(DType::f64);
  t.spec.seed = 5;
  t.spec.zero.bucket_mb = 0.004;  // several buckets per unit
  return t;
}

TrainResult run(TrainConfig t, const std::string& tag) {
  t.save = shared_path(tag + "-params.h5");
  t.dump_grads = shared_path(tag + "-grads.h5");
  TrainResult r = train(t, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  return r;
}

std::int64_t category(const std::vector<std::pair<MemCategory, std::int64_t>>& list, MemCategory c) {
  for (const auto& [k, v] : list)
    if (k == c) return v;
  return -1;
}

}  // namespace

TEST_CASE("ZeRO over dp x depth in 2.5D equals stage 0 in f64", "[train][zero][depth]") {
  const int world = world_size();
  for (const DepthCase& c : depth_cases(world))
    for (const bool clip : {false, true}) {
      if (clip && c.pp > 1) continue;  // clipping is covered without a pipeline (keeps CI under a minute)
      DYNAMIC_SECTION(c.label << (clip ? " clip" : "")) {
        TrainConfig base = config_for(c, world);
        base.spec.optimizer.grad_clip = clip ? 0.3 : 0.0;
        const std::string ref_tag = c.label + (clip ? "-clip" : "") + "-z0";
        run(base, ref_tag);
        struct Variant {
          int stage;
          bool offload, keep;
        };
        const std::vector<Variant> variants = clip ? std::vector<Variant>{{2, false, false}, {3, true, false}}
                                                   : std::vector<Variant>{{1, false, false}, {2, true, false},
                                                                          {3, false, false}, {3, false, true}};
        for (const Variant& v : variants) {
          TrainConfig t = base;
          t.spec.zero.stage = v.stage;
          t.spec.zero.offload = v.offload;
          t.spec.zero.keep_parameters = v.keep;
          const std::string tag = fmt::format("{}-z{}{}{}", ref_tag, v.stage, v.offload ? "o" : "", v.keep ? "k" : "");
          run(t, tag);
          const double grads = file_error(shared_path(tag + "-grads.h5"), shared_path(ref_tag + "-grads.h5"));
          const double params = file_error(shared_path(tag + "-params.h5"), shared_path(ref_tag + "-params.h5"));
          INFO("stage " << v.stage << " offload " << v.offload << " keep " << v.keep << ": gradients " << grads
                        << ", parameters after 3 steps " << params);
          CHECK(grads <= 1e-13);
          CHECK(params <= 1e-10);
          if (world_rank() == 0)
            std::cout << "[zero depth] " << c.label << (clip ? " clip" : "") << " stage " << v.stage
                      << (v.offload ? " offload" : "") << (v.keep ? " keep" : "") << ": gradients " << grads
                      << ", parameters " << params << "\n";
        }
      }
    }
}

TEST_CASE("ZeRO over dp x depth: memory equals the bucket model and the ledger the step plan", "[train][zero][depth]") {
  const int world = world_size();
  for (const DepthCase& c : depth_cases(world))
    for (int stage = 0; stage <= 3; ++stage)
      for (const bool offload : {false, true}) {
        if (offload && stage == 0) continue;
        DYNAMIC_SECTION(c.label << " stage " << stage << (offload ? " offload" : "")) {
          TrainConfig t = config_for(c, world);
          t.steps = 1;
          t.spec.zero.stage = stage;
          t.spec.zero.offload = offload;
          const TrainResult r = train(t, MPI_COMM_WORLD);

          // Memory per category: the allocator's figures equal the plan's model to the byte.
          CHECK(r.memory_held.size() == r.memory_model.size());
          for (std::size_t i = 0; i < r.memory_held.size(); ++i) {
            if (r.memory_model[i].second < 0) continue;
            INFO(mem_category_name(r.memory_held[i].first));
            CHECK(r.memory_held[i].second == r.memory_model[i].second);
          }

          // The ledger equals the whole-step plan of this rank's stage.
          const TrainPlan plan = plan_training(t, world);
          const Topology topology(plan.mesh);
          const int pp_stage = topology.rank_generator().coord(world_rank(), "pp");
          const cost::StepCommConfig sc = step_comm_config(plan);
          const auto model = cost::plan_step_comm(sc, pp_stage).totals();
          CHECK(r.ledger.size() == model.size());
          for (const auto& [key, p] : model) {
            INFO(key.phase << " " << key.group << " " << collective_name(key.op) << ": planned " << p.calls << " calls, "
                           << p.logical_bytes << " B");
            const auto found = r.ledger.find(key);
            CHECK(found != r.ledger.end());
            if (found == r.ledger.end()) continue;
            CHECK(found->second.calls == p.calls);
            CHECK(found->second.logical_bytes == p.logical_bytes);
          }

          // Stages 1–3: the weights move over dp × depth, never summed over tp.dep on their own.
          const int combined = static_cast<int>(topology.groups(kDpDepthGroup).front().size());
          CHECK(combined == c.depth * plan.dp());
          const bool folded = stage >= 1;
          const LedgerKey rs{"grad-sync", kDpDepthGroup, CollectiveOp::reduce_scatter};
          const LedgerKey depth_sum{"grad-sync", "tp.dep", CollectiveOp::all_reduce};
          CHECK(r.ledger.count(rs) == (folded ? 1u : 0u));
          CHECK(r.ledger.count(depth_sum) == (folded ? 0u : 1u));

          // The paper's figures beside the ledger (cost/zero.hpp): stage 0 all-reduces every parameter
          // over dp, exactly 2Psi; stages 1–2 add the bucket padding, reduce-scattered and gathered,
          // and the norm's 8-byte all-reduce over dp.
          const BucketPlan bucket_plan = cost::stage_bucket_plan(sc, pp_stage);
          const cost::ZeroPaperTraffic paper =
              cost::zero_paper_traffic(bucket_plan, stage, t.spec.layout.micro_batches, false, false, r.ledger, &model);
          if (stage <= 2) {
            double expected = paper.paper_bus_bytes;
            if (stage >= 1) {
              for (const Bucket& b : bucket_plan.buckets) {
                double elements = 0.0;
                for (const BucketSlot& s : b.slots) elements += static_cast<double>(s.numel);
                expected += 2.0 * (b.shards - 1) / b.shards * (static_cast<double>(b.padded) - elements) * 8.0;
              }
              if (plan.dp() > 1) expected += 2.0 * (plan.dp() - 1) / plan.dp() * 8.0;
            }
            INFO(paper.line());
            CHECK(std::abs(paper.ledger_bus_bytes - expected) <= 1e-9 * expected);
            CHECK(std::abs(paper.model_bus_bytes - paper.ledger_bus_bytes) <= 1e-9 * expected);
          }
          if (world_rank() == 0 && !offload) std::cout << "[zero depth] " << c.label << " stage " << stage << ": " << paper.line() << "\n";

          // Optimizer state (AdamW): below the dp-only sharding, whose plan is computed here from the
          // same parameters without the fold.
          if (folded) {
            cost::StepCommConfig unfolded = sc;
            unfolded.spec.zero.stage = 0;  // no fold; dp shards, as the engine planned before depth sharding
            std::vector<BucketInput> params = cost::stage_parameters(unfolded, pp_stage);
            BucketOptions o;
            o.dp = plan.dp();
            o.cap_bytes = bucket_cap_bytes(t.spec.zero.bucket_mb);
            o.align_bytes = plan.zero.align_bytes;
            o.unit_aligned = stage == 3;
            const ZeroHeldBytes dp_only = zero_held_bytes(plan_buckets(params, o), stage, offload, true);
            const std::int64_t state = category(r.memory_held, MemCategory::optimizer_state);
            INFO("optimizer state " << state << " B; sharded over dp only " << dp_only.optimizer_state << " B");
            CHECK(state < dp_only.optimizer_state);
            if (world_rank() == 0 && !offload)
              std::cout << "[zero depth] " << c.label << " stage " << stage << ": optimizer state " << state
                        << " B (dp only: " << dp_only.optimizer_state << " B), grad-sync reduce-scatter over "
                        << kDpDepthGroup << " " << r.ledger.at(rs).logical_bytes << " B\n";
          }
        }
      }
}
