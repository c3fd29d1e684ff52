// The planner's ZeRO memory (src/cost/step_memory) against the engine's own bucket plan, in every
// mode and with a two-stage pipeline.  The step model knows units, not buckets: it counts each
// unit's parameters per rank from the layouts' shapes (cost/layer_costs), shards them over dp (2.5D
// weights over dp × depth), and replays the schedule over one bucket per unit for ZeRO-2/3's full
// gradient buckets and ZeRO-3's gathered parameters.  The engine's figures here come from its real
// plan through the same pure functions the trainer holds against the allocator
// (plan/gathered_parameters, plan/gradient_peak), with every bucket's padding and alignment gaps
// left out — the one thing the unit-level model does not know.  With one parameter per bucket
// (a cap below every parameter) a unit's buckets are read, written and freed together, so the
// two must agree exactly:
//   - parameter elements per unit and rank (blocks, the embedding's wte and wpe, the head);
//   - the elements a rank holds between steps once sharded;
//   - ZeRO-3's gathered peak, per pass and kept for the step;
//   - ZeRO-2/3's full-bucket peak, reducing once or per micro-batch, over 1 and 2 micro-batches.
#include <catch2/catch.hpp>

#include <map>

#include "../cost/dgx_a100.hpp"
#include "cost/layer_costs.hpp"
#include "cost/step_memory.hpp"
#include "mesh/mesh.hpp"
#include "plan/gathered_parameters.hpp"
#include "plan/gradient_peak.hpp"
#include "plan/schedule.hpp"
#include "plan/stage_partition.hpp"
#include "plan/unit_passes.hpp"
#include "zero_harness.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

constexpr const char* kWte = "transformer.wte.weight";

// Every ZeRO (mode, mesh) case of this world without a pipeline, and the two-stage ones.
std::vector<ModeCase> cases(int world) {
  std::vector<ModeCase> out = zero_cases_for_world(world);
  for (const ModeCase& c : zero_pipeline_cases_for_world(world)) out.push_back(c);
  return out;
}

// Each bucket's elements without padding or alignment gaps: the parameters it holds.
std::vector<std::int64_t> used_elements(const BucketPlan& plan) {
  std::vector<std::int64_t> out;
  for (const Bucket& b : plan.buckets) {
    std::int64_t n = 0;
    for (const BucketSlot& s : b.slots) n += s.numel;
    out.push_back(n);
  }
  return out;
}

}  // namespace

TEST_CASE("the step model's ZeRO memory is the engine's bucket plan without its padding", "[zero][cost]") {
  const int world = world_size();
  for (const ModeCase& c : cases(world)) {
    const int pp = c.config.pp, tp = c.config.tp, dp = world / (tp * pp);
    const int depth = c.mode == TpMode::d2p5 ? c.config.tp_depth : 1;
    DYNAMIC_SECTION(c.label() << " pp=" << pp << " dp=" << dp) {
      const ModelShape model = zero_model();
      const int L = static_cast<int>(model.layers), head = L + 1;
      GptRun base(c, model, kReplicaBatch * dp, MPI_COMM_WORLD, DType::f32);
      const ParamMap start = random_parameters(base, 17);
      const int stage = base.mesh->comm("pp").rank();
      const StagePartition partition(L, pp, 1);
      std::vector<UnitRange> chunks;
      for (const UnitSpan& s : partition.stage_units(stage)) chunks.push_back(UnitRange{s.first, s.last});

      cost::StepConfig sc;
      sc.spec.model = model;
      sc.spec.layout.mode = c.mode == TpMode::none ? TpMode::d1 : c.mode;  // tp = 1: every mode is the same
      sc.spec.layout.tp = tp;
      sc.spec.layout.depth = depth;
      sc.spec.layout.pp = pp;
      sc.spec.layout.dp = dp;
      sc.spec.precision = precision_for(DType::f32);
      sc.spec.dropout = 0.0;
      const cost::LayerCosts costs = cost::layer_costs(sc.spec.model, sc.spec.layout.mode, tp, depth, kReplicaBatch,
                                                       sc.dtype(), dgx_a100(), {.dropout = sc.dropout()});

      for (int zero : {2, 3})
        for (bool per_micro_batch : {false, true})
          for (bool keep : {false, true})
            for (int m : {1, 2}) {
              if (keep && zero < 3) continue;
              if (pp > 1 && m < pp) continue;  // nothing new: the stage runs one micro-batch
              INFO("zero " << zero << (per_micro_batch ? " per micro-batch" : "") << (keep ? " keep" : "") << " m "
                           << m << " stage " << stage);
              ZeroConfig z;
              z.stage = zero;
              z.bucket_mb = 1e-7;  // below every parameter: one parameter per bucket
              z.keep_parameters = keep;
              z.reduce_per_micro_batch = per_micro_batch;
              ZeroRun run(base, start, z, test_adamw(), chunks);
              const ZeroLayout& layout = run.engine->layout();
              const BucketPlan& plan = run.engine->plan();
              const std::vector<std::int64_t> used = used_elements(plan);
              sc.spec.zero.stage = zero;
              sc.spec.zero.reduce_per_micro_batch = per_micro_batch;
              sc.spec.zero.keep_parameters = keep;
              sc.spec.layout.micro_batches = m;
              sc.spec.global_batch = m * kReplicaBatch * dp;

              // Elements per unit and rank: what layer_costs counts from the layouts.
              std::map<int, std::int64_t> per_unit;
              std::int64_t wte = 0;
              for (const Bucket& b : plan.buckets)
                for (const BucketSlot& s : b.slots) {
                  if (layout.params().at(s.param).name() == kWte && layout.unit(s.param) == 0) wte = s.numel;
                  per_unit[layout.unit(s.param)] += s.numel;
                }
              for (const auto& [unit, n] : per_unit) {
                INFO("unit " << unit);
                if (unit == 0) {
                  CHECK(static_cast<double>(n) == costs.embedding_params);
                  CHECK(static_cast<double>(wte) == costs.wte_params);
                } else if (unit == head) {
                  CHECK(static_cast<double>(n) == costs.head_params + (pp > 1 ? costs.wte_params : 0.0));
                } else {
                  CHECK(static_cast<double>(n) == costs.block_params);
                }
              }
              std::int64_t total = 0;
              double sharded = 0.0;
              for (std::size_t b = 0; b < plan.buckets.size(); ++b) {
                total += used[b];
                sharded += static_cast<double>(used[b]) / plan.buckets[b].shards;
              }
              CHECK(static_cast<double>(total) == cost::stage_parameters(sc, costs, stage));

              // Between steps: the shards (2.5D weights over dp × depth).
              const cost::MemorySplit memory = cost::stage_memory(sc, costs, dgx_a100(), stage);
              CHECK(memory.optimizer == Approx(sharded * sc.optimizer_bytes_per_param()).epsilon(1e-12));

              // Inside a step, over the schedule the trainer runs (1F1B; plain accumulation without
              // a pipeline).
              const Schedule schedule = make_schedule(ScheduleKind::one_f_one_b, pp, m, 1);
              const std::int64_t full = full_gradient_peak(
                  stage_gradient_events(schedule, partition, stage, per_micro_batch), layout.writers(), used);
              CHECK(static_cast<double>(full) == cost::full_gradient_window(sc, costs, stage));
              if (zero == 3) {
                std::vector<std::vector<std::size_t>> reads;
                for (const UnitPass& p : stage_unit_passes(schedule, partition, stage))
                  reads.push_back(p.direction > 0 ? layout.forward_reads(p.unit) : layout.backward_reads(p.unit));
                const std::int64_t gathered = gathered_parameter_peak(reads, used, keep);
                CHECK(static_cast<double>(gathered) == cost::gathered_parameter_window(sc, costs, stage));
              }
            }
    }
  }
}
