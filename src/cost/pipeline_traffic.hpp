#pragma once
// The point-to-point traffic of a pipeline step, per rank, read off the schedule (src/plan) and
// the residual layout (Geometry) — the calls the pipeline engine (src/pipeline) records in the
// ledger's phase "pipeline", so the two can be compared per (group, op) to the byte.
//
// What crosses a stage boundary is the residual stream of one micro-batch, [b·T, H], in the
// mode's residual layout: this rank's shard of it.  Where that layout leaves the shard whole on
// every rank of a TP group (1D without sequence parallelism: the `tp` group), each rank sends
// only 1/tp of its rows and the receiving stage all-gathers the slices over `tp` (Megatron's
// scatter/gather optimisation).  Per action of stage r, on virtual stage k = c·p + r of V = p·v:
//   F (k > 0)          receive one slice from k − 1            (pp, recv)  [+ all-gather over tp]
//   F (k < V − 1)      send one slice to k + 1                 (pp, send)
//   B or BW (k < V−1)  receive one gradient slice from k + 1   (pp, recv)  [+ all-gather over tp]
//   B or BW (k > 0)    send one gradient slice to k − 1        (pp, send)
//   W                  nothing
#include <cstdint>
#include <string>
#include <vector>

#include "cost/cost_model.hpp"
#include "plan/schedule.hpp"

namespace mdtp::cost {

// One rank's view of a stage boundary for one micro-batch.
struct PipelineBoundary {
  std::int64_t shard_elements = 0;  // this rank's shard of the residual stream [b·T, H]
  int slices = 1;                   // ranks that hold the shard whole and send 1/slices each
  std::string gather_group;         // where the receiver all-gathers the slices ("" when slices = 1)
  std::int64_t wire_elements() const { return shard_elements / slices; }
};

// The boundary of a workload's residual layout: `workload.rows` = b·T of one micro-batch,
// `workload.hidden` = H, mode and mesh as the run's (its layer is ignored).  An mdtp::Error naming
// the value for a layout that does not split, or rows the 1D slices do not divide.
PipelineBoundary pipeline_boundary(const Workload& workload);

// Every call stage `stage` issues in one step of `schedule` (phase "pipeline": sends and receives
// on the `pp` group, the receiver's all-gathers on the boundary's gather group), in action order.
// Summed with summarize(), they are what CommLedger::summary() holds for that phase.
std::vector<PlannedCall> pipeline_calls(const Schedule& schedule, int stage, const PipelineBoundary& boundary,
                                        DType dtype);

}  // namespace mdtp::cost
