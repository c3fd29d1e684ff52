#include "plan/gradient_peak.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace mdtp {

std::vector<GradientEvent> stage_gradient_events(const Schedule& schedule, const StagePartition& partition, int stage) {
  const std::vector<int> last_weight = last_weight_actions(schedule, stage);  // validates the stage
  const std::vector<UnitSpan> spans = partition.stage_units(stage);
  require(spans.size() == static_cast<std::size_t>(schedule.chunks), "gradient events: stage ", stage, " holds ",
          spans.size(), " chunks; the schedule runs ", schedule.chunks);
  std::vector<GradientEvent> events;
  const std::vector<Action>& list = schedule.actions[static_cast<std::size_t>(stage)];
  for (std::size_t i = 0; i < list.size(); ++i) {
    const Action& a = list[i];
    const UnitSpan& span = spans.at(static_cast<std::size_t>(a.chunk));
    const bool last = last_weight[static_cast<std::size_t>(a.chunk)] == static_cast<int>(i);
    auto inputs = [&] {
      for (int u = span.last; u >= span.first; --u) events.push_back({u, false});
    };
    auto weights = [&] {
      if (last)
        for (int u = span.last; u >= span.first; --u) events.push_back({u, true});
    };
    switch (a.op) {
      case PassKind::F: break;
      case PassKind::B: inputs(); break;
      case PassKind::W: weights(); break;
      case PassKind::BW:
        if (fused_backward_unit_by_unit(schedule, stage, a.chunk)) {
          for (int u = span.last; u >= span.first; --u) {
            events.push_back({u, false});
            if (last) events.push_back({u, true});
          }
        } else {
          inputs();
          weights();
        }
        break;
    }
  }
  return events;
}

std::int64_t full_gradient_peak(const std::vector<GradientEvent>& events, const std::vector<std::vector<int>>& writers,
                                const std::vector<std::int64_t>& bucket_bytes) {
  require(writers.size() == bucket_bytes.size(), "gradient peak: ", writers.size(), " writer lists for ",
          bucket_bytes.size(), " buckets");
  const std::size_t n = bucket_bytes.size();
  std::vector<std::vector<int>> outstanding = writers;
  std::vector<bool> open(n, false), started(n, false);
  std::vector<std::size_t> in_flight;
  std::int64_t held = 0, peak = 0;
  for (const GradientEvent& e : events) {
    if (!e.ready) {
      // The engine opens, in bucket order, every bucket the unit writes that holds no buffer yet;
      // a started bucket's writers are all done, so none of them comes back to it.
      for (std::size_t b = 0; b < n; ++b) {
        const bool writes = std::find(writers[b].begin(), writers[b].end(), e.unit) != writers[b].end();
        if (writes && !open[b] && !started[b]) {
          open[b] = true;
          held += bucket_bytes[b];
        }
      }
      peak = std::max(peak, held);
      continue;
    }
    std::vector<std::size_t> now;
    for (std::size_t b = 0; b < n; ++b) {
      auto& left = outstanding[b];
      const auto it = std::find(left.begin(), left.end(), e.unit);
      if (it == left.end()) continue;
      left.erase(it);
      if (left.empty() && !started[b]) {
        require(open[b], "gradient peak: bucket ", b, " is complete before any unit writing it ran its backward");
        started[b] = true;
        now.push_back(b);
      }
    }
    if (now.empty()) continue;
    for (const std::size_t b : in_flight) {
      open[b] = false;
      held -= bucket_bytes[b];
    }
    in_flight = std::move(now);
  }
  return peak;
}

}  // namespace mdtp
