#include "plan/bucket_memory.hpp"

#include "core/error.hpp"

namespace mdtp {

ZeroHeldBytes zero_held_bytes(const BucketPlan& plan, int stage, bool offload, bool moments) {
  require(stage >= 0 && stage <= 3, "ZeRO stage must be 0, 1, 2 or 3; got ", stage);
  ZeroHeldBytes held;
  for (const Bucket& b : plan.buckets) {
    // Master weights: kept for 16-bit values (mixed precision), and by offload at any dtype.
    const bool masters = is_16bit(b.dtype) || (offload && stage > 0);
    if (stage == 0) {  // each parameter in a tensor of its own: no padding
      std::int64_t numel = 0;
      for (const BucketSlot& s : b.slots) numel += s.numel;
      const auto size = [&](DType d) { return numel * static_cast<std::int64_t>(dtype_size(d)); };
      held.parameters += size(b.dtype);
      held.gradients += size(b.grad_dtype);
      held.optimizer_state += moments ? 2 * size(b.state_dtype()) : 0;
      held.master_weights += masters ? size(b.state_dtype()) : 0;
      continue;
    }
    held.parameters += stage < 3 ? b.value_bytes() : b.value_shard_bytes();
    held.gradients += (stage == 1 ? b.grad_bytes() : b.grad_shard_bytes()) + (offload ? b.state_shard_bytes() : 0);
    held.optimizer_state += moments ? 2 * b.state_shard_bytes() : 0;
    held.master_weights += masters ? b.state_shard_bytes() : 0;
  }
  return held;
}

ZeroHeldBytes zero_offloaded_bytes(const BucketPlan& plan, int stage, bool offload, bool moments) {
  if (!offload || stage == 0) return {};
  const ZeroHeldBytes held = zero_held_bytes(plan, stage, offload, moments);
  ZeroHeldBytes host;
  host.gradients = plan.state_shard_bytes();  // the reduced gradient shard's copy, in the state dtype
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
