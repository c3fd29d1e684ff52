#include "plan/activation_peak.hpp"

#include <algorithm>
#include <map>

#include "core/error.hpp"

namespace mdtp {

std::int64_t activation_peak(const Schedule& schedule, const MicroBatchPassPeaks& peaks) {
  require(schedule.stages == 1 && schedule.chunks == 1, "activation peak: modelled for one stage holding one chunk ",
          "(no pipeline); got ", schedule.stages, " stages and ", schedule.chunks, " chunks per stage");
  std::map<int, std::int64_t> held;  // micro-batch → the bytes its context holds now
  std::int64_t others = 0, peak = 0;
  // The pass of micro-batch `mb` reaches `top` above the other contexts and leaves `after`.
  auto pass = [&](int mb, std::int64_t top, std::int64_t after) {
    const auto it = held.find(mb);
    if (it != held.end()) {
      others -= it->second;
      held.erase(it);
    }
    peak = std::max(peak, others + top);
    if (after > 0) held[mb] = after;
    others += after;
  };
  for (const Action& a : schedule.actions.front()) {
    switch (a.op) {
      case PassKind::F: pass(a.microbatch, peaks.forward_peak, peaks.after_forward); break;
      case PassKind::B: pass(a.microbatch, peaks.input_peak, peaks.after_input); break;
      case PassKind::W: pass(a.microbatch, peaks.after_input, 0); break;  // it only releases
      case PassKind::BW:
        if (fused_backward_unit_by_unit(schedule, 0, a.chunk)) {
          pass(a.microbatch, peaks.fused_peak, 0);
        } else {
          pass(a.microbatch, peaks.input_peak, peaks.after_input);
          pass(a.microbatch, peaks.after_input, 0);
        }
        break;
    }
  }
  return peak;
}

}  // namespace mdtp
