#pragma once
// Kept activations of one pipeline stage over a step's schedule (docs/memory.md): every
// (micro-batch, chunk) context holds, from its forward F until its backward-input pass B, the sum
// of its units' after-forward bytes, and from B until its weight pass W their after-input bytes;
// a fused backward BW passes through both, except where it runs unit by unit
// (fused_backward_unit_by_unit: no pass end between B and W).  The stage's kept bytes after a
// pass are the sum over the contexts then in flight; the peak is their maximum over the pass ends
// of the step — where GptModel samples the same sum from the tensors the contexts hold.
#include <cstdint>
#include <vector>

#include "plan/schedule.hpp"
#include "plan/stage_partition.hpp"

namespace mdtp {

// One unit, one micro-batch (model/activation_bytes.hpp computes them from the local shapes).
struct UnitKeptBytes {
  std::int64_t after_forward = 0, after_input = 0;
};

struct KeptActivations {
  std::vector<std::int64_t> after_pass;  // after each pass end of the stage, in order (a split BW: two)
  std::int64_t peak = 0;
  int peak_contexts = 0;  // contexts in flight at the (first) peak
};

// `units` is indexed by global unit (0 … n_layer + 1); an mdtp::Error for one that is too short
// or a schedule and partition that disagree.
KeptActivations kept_activations(const Schedule& schedule, const StagePartition& partition, int stage,
                                 const std::vector<UnitKeptBytes>& units);

}  // namespace mdtp
