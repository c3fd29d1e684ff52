#include "plan/bucket_memory.hpp"

#include "core/error.hpp"

namespace mdtp {

ZeroHeldBytes zero_held_bytes(const BucketPlan& plan, int stage, bool offload, bool moments) {
  require(stage >= 0 && stage <= 3, "ZeRO stage must be 0, 1, 2 or 3; got ", stage);
  ZeroHeldBytes held;
  if (stage == 0) {
    std::int64_t unpadded = 0;
    for (const Bucket& b : plan.buckets)
      for (const BucketSlot& s : b.slots) unpadded += s.numel * static_cast<std::int64_t>(dtype_size(b.dtype));
    held.parameters = held.gradients = unpadded;
    held.optimizer_state = moments ? 2 * unpadded : 0;
    return held;
  }
  const std::int64_t full = plan.padded_bytes(), shard = plan.shard_bytes();
  held.parameters = stage < 3 ? full : shard;
  held.gradients = (stage == 1 ? full : shard) + (offload ? shard : 0);
  held.optimizer_state = moments ? 2 * shard : 0;
  held.master_weights = offload ? shard : 0;
  return held;
}

ZeroHeldBytes zero_offloaded_bytes(const BucketPlan& plan, int stage, bool offload, bool moments) {
  if (!offload || stage == 0) return {};
  const ZeroHeldBytes held = zero_held_bytes(plan, stage, offload, moments);
  ZeroHeldBytes host;
  host.gradients = plan.shard_bytes();
  host.optimizer_state = held.optimizer_state;
  host.master_weights = held.master_weights;
  return host;
}

ZeroHeldBytes zero_device_bytes(const BucketPlan& plan, int stage, bool offload, bool moments) {
  ZeroHeldBytes d = zero_held_bytes(plan, stage, offload, moments);
  const ZeroHeldBytes host = zero_offloaded_bytes(plan, stage, offload, moments);
  d.gradients -= host.gradients;
  d.optimizer_state -= host.optimizer_state;
  d.master_weights -= host.master_weights;
  return d;
}

}  // namespace mdtp
