#pragma once
// Memory per GPU of a training step: the larger of the first and the last pipeline stage (the
// first holds the most micro-batches in flight, the last the head and its logits).
//
//   parameters   P_r elements on stage r (its blocks; the embedding on stage 0; the final
//                norm, and with pp > 1 the tied wte copy — or an untied head's own weight,
//                whatever pp — on stage p−1) × δ
//   gradients    P_r × g (g = grad_dtype's bytes: fp32 main gradients under bf16)
//   optimizer    P_r × K (Adam: 12 with a 16-bit dtype — fp32 master, m, v — else 8); under
//                ZeRO-Offload none on the GPU: the shard's state and f32 gradients are in host
//                memory (MemorySplit::host, offload_cost.hpp)
//   ZeRO over dp (docs/theory.md §4): stage ≥ 1 divides K by dp, stage 2 also the g held between
//                steps, stage 3 also δ (2.5D: its weights, whose depth copies are replicas, over
//                dp × depth).  Stage 3 adds the gathered parameters: the engine gathers what a
//                unit's pass reads before it runs and prefetches what the next pass of the stage's
//                action list reads (plan/unit_passes.hpp), freeing both after use, so the peak is
//                the largest pair of neighbouring passes (plan/gathered_parameters.hpp) — the tied
//                wte with a block when the vocabulary is large, not merely two blocks; keeping
//                them for the step (zero_keep_parameters), every bucket the stage reads.
//                Inside a step ZeRO-2/3 also hold full gradient buckets, as mdtp's engine does
//                (docs/zero.md §3, plan/gradient_peak.hpp): opened when backward first writes a
//                unit, freed once its reduce-scatter is done after the unit's last weight pass.
//                With one micro-batch and a fused backward that runs unit by unit (no pipeline, or
//                the first stage) that is about two units (+ the tied wte, which the head and the
//                embedding both write); with several micro-batches every unit's buckets stay from
//                the first micro-batch's backward to the last one's: the whole stage, so the
//                paper's (2 + K/N_d)·Ψ of stage 2 holds only with one micro-batch per step.  The
//                model replays the schedule over one bucket per unit (units, not the 25 MB cap,
//                are what this formula knows; padding is ignored)
//   activations  (peak micro-batches in flight on the stage, pipeline_bubble.hpp's
//                peak_in_flight; 1 without a pipeline) × (its layers, per chunk when interleaved)
//                × the kept bytes per layer (layer_costs.hpp: Korthikanti et al. 2022), plus, with
//                recomputation, the working set of the one layer being recomputed (selective:
//                the core's 5as/h; without kept probabilities — a streaming attention kernel —
//                that term is absent everywhere and selective is none); the last stage
//                adds the head's kept bytes per micro-batch in flight
//   reserved     the cluster's reserved_bytes (context, workspaces, communicator buffers)
#include "cost/cluster.hpp"
#include "cost/layer_costs.hpp"
#include "cost/step_config.hpp"

namespace mdtp::cost {

struct MemorySplit {
  int stage = 0;  // the stage it describes (the larger)
  double parameters = 0.0, gradients = 0.0, optimizer = 0.0, activations = 0.0, reserved = 0.0;
  double gradients_in_step = 0.0;    // of `gradients`: ZeRO-2/3's full buckets at their peak in a step
  double parameters_gathered = 0.0;  // of `parameters`: ZeRO-3's gathered buckets at their peak
  double parameter_elements = 0.0;  // on this rank
  // ZeRO-Offload: the optimizer state, not in `optimizer` (nor in total()), and the host's f32
  // gradient buffer, in host memory (offload_cost.hpp OffloadCost::host_bytes); 0 otherwise.
  double host = 0.0;
  int in_flight = 0;                // micro-batches (interleaved: micro-batch × chunk passes) held
  double total() const { return parameters + gradients + optimizer + activations + reserved; }
};

// Parameter elements on one rank of stage r.
double stage_parameters(const StepConfig& config, const LayerCosts& costs, int stage);

// ZeRO-2/3: the largest number of gradient elements one rank of stage r holds in full buckets at
// once inside a step (the replay above; 0 below stage 2).
double full_gradient_window(const StepConfig& config, const LayerCosts& costs, int stage);

// ZeRO-3: the largest number of parameter elements one rank of stage r holds gathered at once
// inside a step (the pass-order replay above; 0 below stage 3).
double gathered_parameter_window(const StepConfig& config, const LayerCosts& costs, int stage);

// Stage r's memory per GPU (an mdtp::Error for a stage outside 0 … pp−1).
MemorySplit stage_memory(const StepConfig& config, const LayerCosts& costs, const Cluster& cluster, int stage);
// The larger of the first and the last stage's.
MemorySplit step_memory(const StepConfig& config, const LayerCosts& costs, const Cluster& cluster);

}  // namespace mdtp::cost
