#include "plan/gradient_peak.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "plan/gradient_rounds.hpp"

namespace mdtp {

std::vector<GradientEvent> stage_gradient_events(const Schedule& schedule, const StagePartition& partition, int stage,
                                                 bool per_micro_batch) {
  const std::vector<int> last_weight = last_weight_actions(schedule, stage);  // validates the stage
  const std::vector<UnitSpan> spans = partition.stage_units(stage);
  require(spans.size() == static_cast<std::size_t>(schedule.chunks), "gradient events: stage ", stage, " holds ",
          spans.size(), " chunks; the schedule runs ", schedule.chunks);
  std::vector<GradientEvent> events;
  const std::vector<Action>& list = schedule.actions[static_cast<std::size_t>(stage)];
  for (std::size_t i = 0; i < list.size(); ++i) {
    const Action& a = list[i];
    const UnitSpan& span = spans.at(static_cast<std::size_t>(a.chunk));
    const bool last = per_micro_batch || last_weight[static_cast<std::size_t>(a.chunk)] == static_cast<int>(i);
    auto inputs = [&] {
      for (int u = span.last; u >= span.first; --u) events.push_back({u, false});
    };
    // Reporting per micro-batch, a weight pass also opens its unit's buckets: an earlier report
    // may have detached them since the backward-input pass (ZB-H1's deferred W).  Reporting once
    // per step, they are always still open there, so that open is left out.
    auto weights = [&] {
      for (int u = span.last; u >= span.first; --u) {
        if (per_micro_batch) events.push_back({u, false});
        if (last) events.push_back({u, true});
      }
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
  GradientRounds rounds(writers);
  std::vector<bool> open(n, false);
  std::vector<std::size_t> in_flight;  // buckets whose latest round's buffer is still held
  std::int64_t held = 0, peak = 0;
  auto complete_in_flight = [&] {
    for (const std::size_t b : in_flight) held -= bucket_bytes[b];
    in_flight.clear();
  };
  for (const GradientEvent& e : events) {
    if (!e.ready) {
      // A bucket about to reopen while its round is in flight: the engine completes the rounds in
      // flight first.
      if (std::any_of(in_flight.begin(), in_flight.end(), [&](std::size_t b) { return rounds.writes(e.unit, b); }))
        complete_in_flight();
      // The engine opens, in bucket order, every bucket the unit writes that holds no buffer.
      for (std::size_t b = 0; b < n; ++b) {
        if (rounds.writes(e.unit, b) && !open[b]) {
          open[b] = true;
          held += bucket_bytes[b];
        }
      }
      peak = std::max(peak, held);
      continue;
    }
    std::vector<std::size_t> now = rounds.report(e.unit);
    if (now.empty()) continue;
    for (const std::size_t b : now) {
      require(open[b], "gradient peak: a round of bucket ", b, " starts before any unit writing it ran its backward");
      open[b] = false;  // detached: held until the round completes, a later pass opens another
    }
    complete_in_flight();
    in_flight = std::move(now);
  }
  return peak;
}

}  // namespace mdtp
