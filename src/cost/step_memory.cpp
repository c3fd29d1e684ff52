#include "cost/step_memory.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "core/error.hpp"
#include "cost/offload_cost.hpp"
#include "plan/gathered_parameters.hpp"
#include "plan/gradient_peak.hpp"
#include "plan/schedule.hpp"
#include "plan/stage_partition.hpp"
#include "plan/unit_passes.hpp"

namespace mdtp::cost {

double stage_parameters(const StepConfig& c, const LayerCosts& costs, int stage) {
  double n = static_cast<double>(c.stage_blocks(stage)) * costs.block_params;
  if (c.holds_embedding(stage)) n += costs.embedding_params;
  if (c.holds_head(stage)) n += costs.head_params + (c.head_copies_wte(stage) ? costs.wte_params : 0.0);
  return n;
}

namespace {

// Stage r's parameters at the planner's resolution: one bucket per unit, the wte a bucket of its
// own (units, not the 25 MB cap, are what this model knows; padding is ignored).  In elements per
// rank, with the units writing each bucket and the buckets each unit's forward and backward-input
// pass read, as src/zero's layout has them: the head's passes read the final norm and the wte
// when tied (the embedding's without a pipeline; its own copy with one), or the head bucket alone
// when untied (its own weight is in it); the embedding's forward reads wpe (GPT-2) and the wte,
// its backward-input pass nothing (its whole backward is a weight pass).
struct StageBuckets {
  std::vector<std::vector<int>> writers;
  std::vector<std::int64_t> elements;
  std::map<int, std::vector<std::size_t>> forward_reads, backward_reads;
};

StageBuckets stage_buckets(const StepConfig& c, const LayerCosts& costs, const StagePartition& partition, int stage) {
  const int head = static_cast<int>(c.spec.model.layers) + 1;
  StageBuckets s;
  auto bucket = [&](std::vector<int> units, double n) {
    s.writers.push_back(std::move(units));
    s.elements.push_back(std::llround(n));
    return s.writers.size() - 1;
  };
  // In the order backward produces them: units descending.
  const bool tied = c.spec.model.tied_head;
  std::size_t ln_f = 0, wte = 0;
  bool holds_head = false;
  for (const UnitSpan& span : partition.stage_units(stage)) {
    for (int u = span.last; u >= span.first; --u) {
      if (u == head) {
        holds_head = true;
        ln_f = bucket({head}, costs.head_params);
        if (c.head_copies_wte(stage)) wte = bucket({head}, costs.wte_params);
      } else if (u == 0) {
        s.forward_reads[0] = {};
        if (costs.embedding_params > costs.wte_params)  // wpe
          s.forward_reads[0].push_back(bucket({0}, costs.embedding_params - costs.wte_params));
        wte = bucket(tied && c.holds_head(stage) ? std::vector<int>{head, 0} : std::vector<int>{0}, costs.wte_params);
        s.forward_reads[0].push_back(wte);
        s.backward_reads[0] = {};
      } else {
        const std::size_t b = bucket({u}, costs.block_params);
        s.forward_reads[u] = s.backward_reads[u] = {b};
      }
    }
  }
  if (holds_head) {
    const std::vector<std::size_t> reads = tied ? std::vector<std::size_t>{ln_f, wte} : std::vector<std::size_t>{ln_f};
    s.forward_reads[head] = s.backward_reads[head] = reads;
  }
  return s;
}

Schedule step_schedule(const StepConfig& c, std::int64_t micro_batches) {
  return make_schedule(c.spec.layout.schedule, c.spec.layout.pp, static_cast<int>(micro_batches), c.spec.layout.chunks);
}

}  // namespace

double full_gradient_window(const StepConfig& c, const LayerCosts& costs, int stage) {
  if (c.spec.zero.stage < 2) return 0.0;
  const bool per_micro_batch = c.spec.zero.reduce_per_micro_batch;
  // Reducing once per step without interleaving, several micro-batches keep every unit's buckets
  // from the first micro-batch's backward (which opens them all) until the last one's weight
  // pass: the stage.
  if (!per_micro_batch && c.microbatches() > 1 && c.spec.layout.schedule != ScheduleKind::interleaved)
    return stage_parameters(c, costs, stage);
  // Reducing per micro-batch without a pipeline, every micro-batch replays the same events from
  // the same state (the embedding's rounds in flight), so two micro-batches give the peak.
  const std::int64_t m = per_micro_batch && c.spec.layout.pp == 1 ? std::min<std::int64_t>(c.microbatches(), 2) : c.microbatches();
  const StagePartition partition = c.partition();  // the run's own split (--pp-layers) and stage mapping
  const StageBuckets b = stage_buckets(c, costs, partition, stage);
  return static_cast<double>(full_gradient_peak(
      stage_gradient_events(step_schedule(c, m), partition, stage, per_micro_batch), b.writers, b.elements));
}

double gathered_parameter_window(const StepConfig& c, const LayerCosts& costs, int stage) {
  if (c.spec.zero.stage < 3) return 0.0;
  // Keeping them for the step, the first micro-batch reads every bucket (pp micro-batches: the
  // fewest every schedule takes); without a pipeline every micro-batch runs the same passes, so
  // two show every pair of neighbouring passes.
  std::int64_t m = c.microbatches();
  if (c.spec.zero.keep_parameters) m = std::min<std::int64_t>(m, c.spec.layout.pp);
  if (c.spec.layout.pp == 1) m = std::min<std::int64_t>(m, 2);
  const StagePartition partition = c.partition();  // the run's own split (--pp-layers) and stage mapping
  const StageBuckets b = stage_buckets(c, costs, partition, stage);
  std::vector<std::vector<std::size_t>> reads;
  for (const UnitPass& p : stage_unit_passes(step_schedule(c, m), partition, stage))
    reads.push_back((p.direction > 0 ? b.forward_reads : b.backward_reads).at(p.unit));
  return static_cast<double>(gathered_parameter_peak(reads, b.elements, c.spec.zero.keep_parameters));
}

namespace {

MemorySplit memory_of_stage(const StepConfig& c, const LayerCosts& costs, const Cluster& cluster, int stage,
                            const std::vector<int>& in_flight) {
  MemorySplit m;
  m.stage = stage;
  const double dp = c.spec.layout.dp;
  const double delta = static_cast<double>(dtype_size(c.dtype()));
  const double g = static_cast<double>(dtype_size(c.grad_dtype()));
  const double K = c.optimizer_bytes_per_param();
  const double P = stage_parameters(c, costs, stage);
  m.parameter_elements = P;
  // Elements of this stage per rank once ZeRO shards them: 2.5D weights (partial over tp.dep)
  // over dp × depth, everything else over dp (plan/bucket_plan.hpp's fold).
  const double folded = c.spec.layout.mode == TpMode::d2p5 && c.spec.layout.depth > 1
                            ? static_cast<double>(c.stage_blocks(stage)) * costs.block_depth_replica_params
                            : 0.0;
  const double sharded = (P - folded) / dp + folded / (dp * c.spec.layout.depth);
  m.parameters_gathered = gathered_parameter_window(c, costs, stage) * delta;
  m.parameters = (c.spec.zero.stage >= 3 ? sharded : P) * delta + m.parameters_gathered;
  m.gradients_in_step = full_gradient_window(c, costs, stage) * g;
  m.gradients = (c.spec.zero.stage >= 2 ? sharded * g + m.gradients_in_step : P * g);
  m.optimizer = (c.spec.zero.stage >= 1 ? sharded : P) * K;
  if (c.spec.zero.offload) {  // the state and the update on the host (offload_cost.hpp)
    m.host = offload_cost(c, sharded, cluster).host_bytes;
    m.optimizer = 0.0;
  }
  m.reserved = cluster.reserved_bytes;

  // Micro-batches in flight and the layers each holds on this stage.
  m.in_flight = c.spec.layout.pp == 1 ? 1 : in_flight[static_cast<std::size_t>(stage)];
  // Each micro-batch in flight holds one chunk's blocks (the stage's mean chunk under --pp-layers).
  const double layers_per_pass = static_cast<double>(c.stage_blocks(stage)) / c.spec.layout.chunks;
  const ActivationBytes& a = costs.block_activations;
  // A streaming attention kernel never holds the core's T×T tensors: not kept, not recomputed.
  const Recompute r = c.effective_recompute();
  const double core = c.attention_keeps_probabilities ? a.core : 0.0;
  const double kept = r == Recompute::none ? core + a.rest : a.kept(r);
  m.activations = m.in_flight * layers_per_pass * kept;
  if (r == Recompute::full) m.activations += core + a.rest;  // the layer being recomputed
  if (r == Recompute::selective) m.activations += a.core;   // the core being recomputed
  if (c.holds_head(stage)) {
    // The head runs on the last chunk's passes: at most the micro-batches in flight there.
    const int head_in_flight = c.spec.layout.pp == 1 ? 1 : std::max(1, m.in_flight / c.spec.layout.chunks);
    m.activations += head_in_flight * costs.head_activation_bytes;
  }
  return m;
}

std::vector<int> in_flight_per_stage(const StepConfig& c) {
  if (c.spec.layout.pp == 1) return {};
  return peak_in_flight(c.pipeline());
}

}  // namespace

MemorySplit stage_memory(const StepConfig& c, const LayerCosts& costs, const Cluster& cluster, int stage) {
  require(stage >= 0 && stage < c.spec.layout.pp, "stage ", stage, " is not one of the pp=", c.spec.layout.pp, " stages");
  return memory_of_stage(c, costs, cluster, stage, in_flight_per_stage(c));
}

MemorySplit step_memory(const StepConfig& c, const LayerCosts& costs, const Cluster& cluster) {
  const std::vector<int> in_flight = in_flight_per_stage(c);
  // With an even split the first or the last stage holds the most (the embedding, the head, the
  // most micro-batches in flight); with --pp-layers any stage may.
  MemorySplit largest = memory_of_stage(c, costs, cluster, 0, in_flight);
  for (int r = 1; r < c.spec.layout.pp; ++r) {
    if (c.spec.layout.pp_layers.empty() && !c.holds_head(r) && c.spec.layout.stage_mapping == StageMapping::round_robin)
      continue;
    const MemorySplit m = memory_of_stage(c, costs, cluster, r, in_flight);
    if (m.total() > largest.total()) largest = m;
  }
  return largest;
}

}  // namespace mdtp::cost
