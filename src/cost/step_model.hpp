#pragma once
// The whole training step of a GPT on a cluster, analytically (docs/performance-model.md):
//
//   per stage r and micro-batch   F_r, B_r (recomputation included), W_r from layer_costs.hpp:
//                                 kernels (roofline GEMMs, streaming bytes) and the tensor-parallel
//                                 collectives, which are never overlapped
//   pipeline                      m·(max_r (F_r + B_r + W_r) + exposed p2p) + bubble, the bubble of
//                                 pipeline_bubble.hpp's bubble_seconds on the mean stage
//                                 ((p−1)(F+B+W)/v, ZB-H1 (p−1)(F+B−W)); p2p per micro-batch and
//                                 chunk: one send forward, one backward, of the residual shard
//                                 (1D without SP: 1/tp of it, then an all-gather over tp — Megatron's
//                                 scatter/gather)
//   data parallelism              ZeRO 0: all-reduce of the gradients (grad_dtype); 1–2:
//                                 reduce-scatter of gradients + all-gather of parameters; 3: per
//                                 micro-batch two all-gathers of the stage's parameters (kept for
//                                 the step: one, under the first forward), prefetched under that
//                                 micro-batch's compute, the step's first gather exposed; its
//                                 reduce-scatter once per step or per micro-batch.  With
//                                 overlap.dp_gradients, the gradient reduction hides under the last
//                                 micro-batch's backward except what exceeds it, and at least the
//                                 last bucket; the parameter all-gather is exposed
//   once per step                 the TP partial-gradient sums (2.5D depth, biases, LayerNorms),
//                                 the tied-embedding all-reduce over the first and last stage, and
//                                 Adam over the rank's (sharded) parameters: 2g + 2K + δ bytes each
//                                 (ZeRO-Offload: on the host, with its PCIe copies, offload_cost.hpp)
//
// Placement: the link class of the tp, dp and pp groups comes from the mesh (order tp-cp-dp-pp,
// node = rank / gpus_per_node), as everywhere else in mdtp.
#include <string>

#include "cost/cluster.hpp"
#include "cost/layer_costs.hpp"
#include "cost/step_config.hpp"
#include "cost/step_memory.hpp"

namespace mdtp::cost {

// Where the step goes: these add up to step_seconds.
struct TimeSplit {
  double compute = 0.0;     // kernels of the slowest stage, m micro-batches, recomputation included
  double tp_comm = 0.0;     // tensor-parallel collectives (exposed: all of them)
  double pp_comm = 0.0;     // exposed pipeline sends, and the tied-embedding all-reduce
  double dp_comm = 0.0;     // exposed data-parallel (ZeRO) communication
  double bubble = 0.0;      // pipeline fill and drain
  double optimizer = 0.0;   // the Adam update, and Megatron's passes over its gradient buffer; under
                            // ZeRO-Offload the host's update and the new values' copy back
  double total() const { return compute + tp_comm + pp_comm + dp_comm + bubble + optimizer; }
};

// What TimeSplit::compute is made of: the slowest stage's kernels of one step (m micro-batches,
// recomputation included) as GEMM-class kernels — the GEMMs and the attention core, timed at their
// FLOP rate (or their roofline) — and streaming kernels timed at the HBM bandwidth, with the work
// each does; gemm_seconds + stream_seconds = TimeSplit::compute.  Where a prediction and a
// measurement part, this says whether the GEMM rate or the memory-bound kernels carry the step.
struct ComputeSplit {
  double gemm_seconds = 0.0, gemm_flops = 0.0;
  double stream_seconds = 0.0, stream_bytes = 0.0;
};

// The logical bytes one GPU of the busiest stage moves per step on each axis, as the model counts
// them (the buffer of every call, as the ledger counts it; `mdtp cost --step-bytes` has the exact
// per-call plan): tensor-parallel collectives of m micro-batches, pipeline sends, receives and the
// tied-embedding all-reduce, and the data-parallel reduction, ZeRO gathers and updates.
struct TrafficSplit {
  double tp_bytes = 0.0, pp_bytes = 0.0, dp_bytes = 0.0;
  double pcie_bytes = 0.0;  // ZeRO-Offload's copies between the GPU and the host (offload_cost.hpp)
};

struct Placement {
  GroupSpan tp, dp, pp;  // each group's link class, ranks per node and NICs (time_model.hpp)
};
// How the config's tp, dp and pp groups sit on the cluster's nodes.
Placement place(const StepConfig& config, const Cluster& cluster);

struct StepEstimate {
  StepConfig config;
  std::int64_t microbatches = 0;
  double step_seconds = 0.0;
  TrafficSplit traffic;
  double tokens_per_second = 0.0;
  double model_flops = 0.0, hardware_flops = 0.0;  // per step (model_flops.hpp)
  double tflops_per_gpu = 0.0;                     // hardware FLOP/s per GPU / 1e12 (Narayanan's count)
  double mfu = 0.0;  // model FLOPs / (step · GPUs · peak)
  double hfu = 0.0;  // (model FLOPs + the recomputed FLOPs) / (step · GPUs · peak)
  double bubble_fraction = 0.0;  // of the step
  TimeSplit time;
  ComputeSplit compute;  // TimeSplit::compute by kernel class
  MemorySplit memory;
  double memory_capacity = 0.0;  // usable bytes per GPU
  double host_memory_capacity = 0.0;  // the node's system memory (ZeRO-Offload; 0: not asked)
  bool fits = false;                  // in the GPU's memory and, offloading, the node's
  Placement placement;
};

// validate(config), then the model.  `costs` must be layer_costs of the same model, mode, tp,
// depth, micro-batch, dtype and dropout (the planner shares them across configurations).
StepEstimate estimate_step(const StepConfig& config, const LayerCosts& costs, const Cluster& cluster);
// With the placement already known (place() builds the whole mesh: the planner reuses it).
StepEstimate estimate_step(const StepConfig& config, const LayerCosts& costs, const Placement& placement,
                           const Cluster& cluster);
// ZeRO-3's parameter all-gathers of one step, pass by pass as the engine issues them (one
// all-gather per bucket, each priced on the dp group's link: zero3_gather_passes in
// gpt_step_comm.hpp), on the stages that stand for the others.  Per unit pass: the seconds of the
// gathers it waits for at its start (nothing prefetched them) and of those it prefetches for the
// next pass, which hide under it.  Empty below ZeRO-3 or at dp 1.
struct Zero3Pass {
  int unit = 0;
  int direction = +1;  // +1 forward, −1 backward
  int action = 0;      // its schedule action on the stage (a prefetch started in an action's last
                       // pass also runs while the stage waits for the next action's input)
  double waited = 0.0, ahead = 0.0;
};
struct Zero3Timeline {
  std::vector<int> stages;                     // the pipeline stages below
  std::vector<std::vector<Zero3Pass>> passes;  // per stage, in its pass order
};
// An mdtp::Error for a shape the engine would refuse.
Zero3Timeline zero3_gather_timeline(const StepConfig& config, const Placement& placement, const Cluster& cluster);
// Every gather of the timeline's busiest stage, waited for or not: the seconds one step's ZeRO-3
// gathers take on the dp link, end to end.
double zero3_gather_seconds(const StepConfig& config, const Placement& placement, const Cluster& cluster);

// With ZeRO-3's gathers already priced (zero3_gather_timeline of the same configuration: the
// planner shares it between the recomputation policies and gradient reductions, which gather alike).
StepEstimate estimate_step(const StepConfig& config, const LayerCosts& costs, const Placement& placement,
                           const Cluster& cluster, const Zero3Timeline& zero3_gathers);
// Builds the layer costs itself, on the cluster as a job of config.gpus() sees it (for_job: one GPU
// keeps the alone rate).  The overloads above take layer costs their caller built the same way.
StepEstimate estimate_step(const StepConfig& config, const Cluster& cluster);

}  // namespace mdtp::cost
