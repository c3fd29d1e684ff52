#include "zero/zero_config.hpp"

#include "plan/bucket_plan.hpp"

namespace mdtp {

void validate(const ZeroConfig& z, const OptimizerSpec& optimizer) {
  require(z.stage >= 0 && z.stage <= 3, "the ZeRO stage must be 0, 1, 2 or 3; got stage=", z.stage);
  bucket_cap_bytes(z.bucket_mb);  // throws naming bucket_mb
  require(z.align_bytes > 0 && z.align_bytes % 8 == 0 && z.align_bytes <= 4096,
          "the ZeRO bucket alignment must be a multiple of 8 bytes in [8, 4096]; got align_bytes=", z.align_bytes);
  require(!z.offload || z.stage >= 1,
          "ZeRO offload moves the sharded optimizer to the host and needs stage 1, 2 or 3; got stage=", z.stage,
          " with offload");
  require(!z.keep_parameters || z.stage == 3,
          "keep_parameters keeps ZeRO-3's gathered parameters and needs stage 3; got stage=", z.stage);
  require(!z.reduce_per_micro_batch || z.stage >= 2,
          "reduce_per_micro_batch reduce-scatters ZeRO-2/3's sharded gradients and needs stage 2 or 3; got stage=",
          z.stage);
  require(!z.data_parallel_group.empty() && !z.model_parallel_group.empty(),
          "ZeRO needs the names of its data-parallel and model-parallel groups; got '", z.data_parallel_group, "' and '",
          z.model_parallel_group, "'");
  validate(optimizer);
}

}  // namespace mdtp
