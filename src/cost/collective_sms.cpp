#include "cost/collective_sms.hpp"

#include <algorithm>
#include <cmath>

namespace mdtp::cost {

int nccl_channel_sms(const GroupSpan& span, const TimeModel& model) {
  const auto it = model.channel_bandwidth.find(span.link);
  if (it == model.channel_bandwidth.end() || it->second <= 0) return 0;
  const double bandwidth = 1.0 / model.link(span.link, span.nics).beta;
  const int searched = std::max(1, static_cast<int>(std::ceil(bandwidth / it->second - 1e-9)));
  return std::min(kNcclMaxChannels, 2 * searched);
}

bool userbuffers_hold_sms(const PlannedCall& call) {
  return call.op == CollectiveOp::reduce_scatter || call.input_regather;
}

double sm_held_seconds(double concurrent_seconds, int sms, int sm_count) {
  if (sm_count <= 0 || sms <= 0 || concurrent_seconds <= 0) return 0.0;
  return concurrent_seconds * static_cast<double>(std::min(sms, sm_count)) / static_cast<double>(sm_count);
}

}  // namespace mdtp::cost
