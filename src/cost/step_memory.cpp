#include "cost/step_memory.hpp"

#include <algorithm>

namespace mdtp::cost {

double stage_parameters(const StepConfig& c, const LayerCosts& costs, int stage) {
  double n = static_cast<double>(c.layers_per_stage()) * costs.block_params;
  if (stage == 0) n += costs.embedding_params;
  if (stage == c.pp - 1) n += costs.head_params + (c.pp > 1 ? costs.wte_params : 0.0);
  return n;
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
  const bool shard_gradients = c.zero >= 3 || (c.zero == 2 && c.pp == 1);
  m.gradients = (shard_gradients ? sharded : P) * g;
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
