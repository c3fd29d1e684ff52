#pragma once
// ZeroConfig: what a ZeroEngine shards and how (docs/zero.md).  Validated on every rank before
// anything is built, so a bad configuration fails everywhere with the same one-line message.
#include <cstdint>
#include <string>

#include "spec/names.hpp"
#include "zero/optimizer.hpp"

namespace mdtp {

// The run spec's ZeRO options (stage, bucket cap, offload, keep_parameters,
// reduce_per_micro_batch: spec/run_spec.hpp), plus what only the engine chooses.
struct ZeroConfig : ZeroOptions {
  std::int64_t align_bytes = 64;  // start of every parameter and shard inside a bucket
  std::string data_parallel_group = group::dp;
  // The group whose ranks hold distinct elements apart from dp (the gradient norm's sum).
  std::string model_parallel_group = group::tp_pp;
};

// An mdtp::Error naming the offending value (stage, bucket size, alignment, an option that does
// not apply to the stage) or the optimizer's (validate(OptimizerSpec)).
void validate(const ZeroConfig& zero, const OptimizerSpec& optimizer);

}  // namespace mdtp
