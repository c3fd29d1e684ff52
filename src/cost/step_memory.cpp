#include "cost/step_memory.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "plan/gradient_peak.hpp"
#include "plan/schedule.hpp"
#include "plan/stage_partition.hpp"

namespace mdtp::cost {

double stage_parameters(const StepConfig& c, const LayerCosts& costs, int stage) {
  double n = static_cast<double>(c.layers_per_stage()) * costs.block_params;
  if (stage == 0) n += costs.embedding_params;
  if (stage == c.pp - 1) n += costs.head_params + (c.pp > 1 ? costs.wte_params : 0.0);
  return n;
}

double full_gradient_window(const StepConfig& c, const LayerCosts& costs, int stage) {
  if (c.zero < 2) return 0.0;
  const bool per_micro_batch = c.zero_reduce_per_micro_batch;
  // Reducing once per step without interleaving, several micro-batches keep every unit's buckets
  // from the first micro-batch's backward (which opens them all) until the last one's weight
  // pass: the stage.
  if (!per_micro_batch && c.microbatches() > 1 && c.schedule != PipelineSchedule::interleaved)
    return stage_parameters(c, costs, stage);
  // Reducing per micro-batch without a pipeline, every micro-batch replays the same events from
  // the same state (the embedding's rounds in flight), so two micro-batches give the peak.
  const std::int64_t m = per_micro_batch && c.pp == 1 ? std::min<std::int64_t>(c.microbatches(), 2) : c.microbatches();

  // One bucket per unit in elements; the wte bucket has two writers when the stage holds both the
  // embedding and the head (no pipeline), else it belongs to the unit that holds the copy.
  const int L = static_cast<int>(c.model.layers), head = L + 1;
  const StagePartition partition(L, c.pp, c.chunks);
  std::vector<std::vector<int>> writers;
  std::vector<std::int64_t> elements;
  auto bucket = [&](std::vector<int> units, double n) {
    writers.push_back(std::move(units));
    elements.push_back(std::llround(n));
  };
  for (const UnitSpan& span : partition.stage_units(stage)) {
    for (int u = span.last; u >= span.first; --u) {
      if (u == head) {
        bucket({head}, costs.head_params);  // the final LayerNorm
        if (c.pp > 1) bucket({head}, costs.wte_params);
      } else if (u == 0) {
        bucket({0}, costs.embedding_params - costs.wte_params);  // wpe
        bucket(c.pp == 1 ? std::vector<int>{head, 0} : std::vector<int>{0}, costs.wte_params);
      } else {
        bucket({u}, costs.block_params);
      }
    }
  }
  const Schedule schedule =
      make_schedule(parse_schedule(pipeline_schedule_name(c.schedule)), c.pp, static_cast<int>(m), c.chunks);
  return static_cast<double>(
      full_gradient_peak(stage_gradient_events(schedule, partition, stage, per_micro_batch), writers, elements));
}

namespace {

MemorySplit stage_memory(const StepConfig& c, const LayerCosts& costs, const Cluster& cluster, int stage,
                         const std::vector<int>& in_flight) {
  MemorySplit m;
  m.stage = stage;
  const double dp = c.dp;
  const double delta = static_cast<double>(dtype_size(c.dtype));
  const double g = static_cast<double>(dtype_size(c.grad_dtype()));
  const double K = c.optimizer_bytes_per_param();
  const double P = stage_parameters(c, costs, stage);
  m.parameter_elements = P;
  // Elements of this stage per rank once ZeRO shards them: 2.5D weights (partial over tp.dep)
  // over dp × depth, everything else over dp (plan/bucket_plan.hpp's fold).
  const double folded = c.mode == TpMode::d2p5 && c.depth > 1
                            ? static_cast<double>(c.layers_per_stage()) * costs.block_depth_replica_params
                            : 0.0;
  const double sharded = (P - folded) / dp + folded / (dp * c.depth);
  m.parameters = (c.zero >= 3 ? sharded : P) * delta;
  if (c.zero >= 3) m.parameters += 2.0 * costs.block_params * delta;  // a gathered block, and the next
  m.gradients_in_step = full_gradient_window(c, costs, stage) * g;
  m.gradients = (c.zero >= 2 ? sharded * g + m.gradients_in_step : P * g);
  m.optimizer = (c.zero >= 1 ? sharded : P) * K;
  m.reserved = cluster.reserved_bytes;

  // Micro-batches in flight and the layers each holds on this stage.
  m.in_flight = c.pp == 1 ? 1 : in_flight[static_cast<std::size_t>(stage)];
  const double layers_per_pass = static_cast<double>(c.layers_per_stage()) / c.chunks;
  const ActivationBytes& a = costs.block_activations;
  // A streaming attention kernel never holds the core's T×T tensors: not kept, not recomputed.
  const Recompute r = c.effective_recompute();
  const double core = c.attention_keeps_probabilities ? a.core : 0.0;
  const double kept = r == Recompute::none ? core + a.rest : a.kept(r);
  m.activations = m.in_flight * layers_per_pass * kept;
  if (r == Recompute::full) m.activations += core + a.rest;  // the layer being recomputed
  if (r == Recompute::selective) m.activations += a.core;   // the core being recomputed
  if (stage == c.pp - 1) {
    // The head runs on the last chunk's passes: at most the micro-batches in flight there.
    const int head_in_flight = c.pp == 1 ? 1 : std::max(1, m.in_flight / c.chunks);
    m.activations += head_in_flight * costs.head_activation_bytes;
  }
  return m;
}

}  // namespace

MemorySplit step_memory(const StepConfig& c, const LayerCosts& costs, const Cluster& cluster) {
  std::vector<int> in_flight;
  if (c.pp > 1)
    in_flight = peak_in_flight(PipelineConfig{c.pp, static_cast<int>(c.microbatches()), c.chunks, c.schedule});
  const MemorySplit first = stage_memory(c, costs, cluster, 0, in_flight);
  if (c.pp == 1) return first;
  const MemorySplit last = stage_memory(c, costs, cluster, c.pp - 1, in_flight);
  return last.total() > first.total() ? last : first;
}

}  // namespace mdtp::cost
