#pragma once
// The order in which one pipeline stage runs its units' weight-reading passes in a step: for each
// action of its schedule, a forward (F) runs the chunk's units in ascending order, a
// backward-input pass (B, or the fused backward) in descending order; a weight pass (W) reads no
// weights and is not listed.  ZeRO-3 prefetches, while one pass runs, the parameters of the next
// pass in this order (src/zero), and the cost model replays the same order (src/cost), so under
// interleaving or ZB-H1 the unit prefetched is the one the schedule runs next, not merely the next
// block.
#include <vector>

#include "plan/schedule.hpp"
#include "plan/stage_partition.hpp"

namespace mdtp {

struct UnitPass {
  int unit = 0;
  int direction = +1;  // +1 forward, −1 backward-input
  bool operator==(const UnitPass&) const = default;
};

std::vector<UnitPass> stage_unit_passes(const Schedule& schedule, const StagePartition& partition, int stage);

}  // namespace mdtp
