#pragma once
// ZeroConfig: what a ZeroEngine shards and how (docs/zero.md).  Validated on every rank before
// anything is built, so a bad configuration fails everywhere with the same one-line message.
#include <cstdint>
#include <string>

#include "zero/optimizer.hpp"

namespace mdtp {

struct ZeroConfig {
  // 0: the unsharded optimizer (today's Optimizer); 1: optimizer state sharded over dp;
  // 2: + gradients; 3: + parameters.
  int stage = 0;
  double bucket_mb = 25.0;  // cap of one flat bucket, MiB
  // Master weights and moments in host memory, the update on the host (stages 1–3).
  bool offload = false;
  // Stage 3: keep every unit's gathered parameters from its first use until the step's gradients
  // are finished, instead of gathering again for every pass of every micro-batch.
  bool keep_parameters_for_step = false;
  // Stages 2–3: reduce-scatter each bucket after every micro-batch's backward and sum the rounds
  // on the shard (DeepSpeed's stage 2): m× the gradient traffic, but the full buckets are freed
  // after each micro-batch instead of held for the step (docs/zero.md §3).  Default: once per
  // step, after the last micro-batch.
  bool reduce_per_micro_batch = false;
  std::int64_t align_bytes = 64;  // start of every parameter and shard inside a bucket
  std::string data_parallel_group = "dp";
  // The group whose ranks hold distinct elements apart from dp (the gradient norm's sum).
  std::string model_parallel_group = "tp-pp";
};

// An mdtp::Error naming the offending value (stage, bucket size, alignment, an option that does
// not apply to the stage) or the optimizer's (validate(OptimizerConfig)).
void validate(const ZeroConfig& zero, const OptimizerConfig& optimizer);

}  // namespace mdtp
