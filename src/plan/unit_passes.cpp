#include "plan/unit_passes.hpp"

#include "core/error.hpp"

namespace mdtp {

std::vector<UnitPass> stage_unit_passes(const Schedule& schedule, const StagePartition& partition, int stage) {
  require(stage >= 0 && static_cast<std::size_t>(stage) < schedule.actions.size(), "stage ", stage,
          " is not a stage of this schedule (", schedule.actions.size(), " stages)");
  const std::vector<UnitSpan> spans = partition.stage_units(stage);
  std::vector<UnitPass> passes;
  for (const Action& a : schedule.actions[static_cast<std::size_t>(stage)]) {
    require(a.chunk >= 0 && static_cast<std::size_t>(a.chunk) < spans.size(), "schedule action of chunk ", a.chunk,
            " on stage ", stage, ", which holds ", spans.size(), " chunk(s)");
    const UnitSpan& r = spans[static_cast<std::size_t>(a.chunk)];
    if (a.op == PassKind::F)
      for (int u = r.first; u <= r.last; ++u) passes.push_back({u, +1});
    if (a.op == PassKind::B || a.op == PassKind::BW)
      for (int u = r.last; u >= r.first; --u) passes.push_back({u, -1});
  }
  return passes;
}

}  // namespace mdtp
