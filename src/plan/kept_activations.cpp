#include "plan/kept_activations.hpp"

#include <map>
#include <utility>

#include "core/error.hpp"

namespace mdtp {

KeptActivations kept_activations(const Schedule& schedule, const StagePartition& partition, int stage,
                                 const std::vector<UnitKeptBytes>& units) {
  require(stage >= 0 && stage < schedule.stages, "kept activations: stage ", stage, " is outside [0, ",
          schedule.stages, ")");
  const std::vector<UnitSpan> chunks = partition.stage_units(stage);
  require(static_cast<int>(chunks.size()) == schedule.chunks, "kept activations: stage ", stage, " holds ",
          chunks.size(), " chunks; the schedule runs ", schedule.chunks);
  std::vector<UnitKeptBytes> per_chunk;
  for (const UnitSpan& c : chunks) {
    require(c.last < static_cast<int>(units.size()), "kept activations: unit ", c.last, " has no bytes (",
            units.size(), " units given)");
    UnitKeptBytes sum;
    for (int u = c.first; u <= c.last; ++u) {
      sum.after_forward += units[static_cast<std::size_t>(u)].after_forward;
      sum.after_input += units[static_cast<std::size_t>(u)].after_input;
    }
    per_chunk.push_back(sum);
  }
  KeptActivations out;
  std::map<std::pair<int, int>, std::int64_t> live;  // (micro-batch, chunk) → bytes held
  std::int64_t total = 0;
  auto pass_end = [&] {
    out.after_pass.push_back(total);
    if (total > out.peak) {
      out.peak = total;
      out.peak_contexts = static_cast<int>(live.size());
    }
  };
  auto set = [&](const Action& a, std::int64_t bytes) {
    const std::pair<int, int> key{a.microbatch, a.chunk};
    total -= live.count(key) ? live[key] : 0;
    total += bytes;
    live[key] = bytes;
  };
  auto finish = [&](const Action& a) {
    const auto it = live.find({a.microbatch, a.chunk});
    require(it != live.end(), "kept activations: the weight pass of micro-batch ", a.microbatch, " (chunk ", a.chunk,
            ") comes before its forward");
    total -= it->second;
    live.erase(it);
  };
  for (const Action& a : schedule.actions.at(static_cast<std::size_t>(stage))) {
    const UnitKeptBytes& c = per_chunk.at(static_cast<std::size_t>(a.chunk));
    switch (a.op) {
      case PassKind::F: set(a, c.after_forward); break;
      case PassKind::B: set(a, c.after_input); break;
      case PassKind::W: finish(a); break;
      case PassKind::BW:
        if (!fused_backward_unit_by_unit(schedule, stage, a.chunk)) {
          set(a, c.after_input);
          pass_end();
        }
        finish(a);
        break;
    }
    pass_end();
  }
  return out;
}

}  // namespace mdtp
