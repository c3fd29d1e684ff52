#pragma once
// The allocator's `activations` peak of a stage that holds the whole model (no pipeline: one
// stage, one chunk) over a step's schedule (docs/memory.md, "The working set").  Every
// micro-batch runs the same passes, so one micro-batch's replay (model/activation_timeline.hpp)
// gives, per pass, the most its tensors reach inside it and what they hold after it; a pass of
// one micro-batch then sees the other micro-batches' contexts as they stand, and the peak is the
// largest such sum over the actions.  With a pipeline the residual tensors handed between stages
// are held until non-blocking sends complete, which depends on the peers' timing: refused.
#include <cstdint>

#include "plan/schedule.hpp"

namespace mdtp {

// One micro-batch's `activations` bytes, per pass (each starting where the one before ended).
struct MicroBatchPassPeaks {
  std::int64_t forward_peak = 0, after_forward = 0;  // F, from nothing
  std::int64_t input_peak = 0, after_input = 0;      // B, from after_forward
  std::int64_t fused_peak = 0;                       // BW run unit by unit, from after_forward to nothing
};

// An mdtp::Error for a schedule of more than one stage or chunk.
std::int64_t activation_peak(const Schedule& schedule, const MicroBatchPassPeaks& peaks);

}  // namespace mdtp
