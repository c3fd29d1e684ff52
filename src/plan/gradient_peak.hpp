#pragma once
// ZeRO-2/3's full gradient buckets inside a step (docs/zero.md §3).  Between steps a rank holds
// only its shard of each bucket's gradient; inside a step, a bucket's full (padded) gradient buffer
// exists from the start of a backward-input pass of a unit that adds into it (when none is open),
// until the reduce-scatter round that reads it has completed.  A unit reports after its last
// weight pass of the step (or, reducing per micro-batch, after each weight pass); a round of a
// bucket starts (gradient_rounds.hpp) — and the buffer is detached, so a later pass opens a new one
// — once every unit writing into it has reported once more; the engine waits for the round, then
// frees the buffer, when the next report that starts a round arrives, when a pass is about to
// reopen a bucket whose round is still in flight (then it waits for every round in flight), or at
// the end of backward.  So the buffers held at every point follow from the stage's action list
// alone; their largest sum is the peak of the `gradients` counter above the shards.
//
// Where it helps: a fused backward that runs unit by unit (virtual stage 0: pp = 1, or the first
// stage) completes each unit's gradients before the next unit's backward starts, so only the
// buckets of about two units (and any bucket a later unit still writes, such as a tied wte) are
// held at once.  With several micro-batches per step, or split B and W passes, every bucket stays
// until the step's last weight pass of its units, and the peak approaches the full buckets.
#include <cstdint>
#include <vector>

#include "plan/schedule.hpp"
#include "plan/stage_partition.hpp"

namespace mdtp {

// A unit's backward-input pass begins (ready = false: its buckets are allocated if not open), or
// the unit reports (ready = true: after its last weight pass of the step, or after each one).
struct GradientEvent {
  int unit = 0;
  bool ready = false;
  bool operator==(const GradientEvent&) const = default;
};

// The events of stage `stage` in the order its engine sees them (plan/schedule.hpp: the action list,
// last_weight_actions, fused_backward_unit_by_unit).  `per_micro_batch`: a unit reports after
// every weight pass, not only the step's last, and a separate weight pass (W, or BW's weight half
// when split) first opens its unit's buckets, which a report may have detached since its B.
std::vector<GradientEvent> stage_gradient_events(const Schedule& schedule, const StagePartition& partition, int stage,
                                                 bool per_micro_batch = false);

// `writers[b]`: the units whose passes add into bucket b; `bucket_bytes[b]`: its padded bytes.
// Returns the largest sum of full gradient buffers held at once over the events.  An mdtp::Error
// when the two lists differ in length, or a round would start on a bucket with no buffer open.
std::int64_t full_gradient_peak(const std::vector<GradientEvent>& events, const std::vector<std::vector<int>>& writers,
                                const std::vector<std::int64_t>& bucket_bytes);

}  // namespace mdtp
