#pragma once
// What one rank holds between steps under a ZeRO stage, per memory category, from the bucket plan
// alone (docs/zero.md §3), to the byte: padding included, because the buffers are the padded
// buckets.  The engine's allocations are held against it (tests/zero, and every `mdtp train` run's
// `memory` table).
//
//   stage   parameters   gradients                 optimizer state (AdamW)   master weights
//   0       Σ params     Σ params                  2 · Σ params              16-bit ? Σ params : 0
//   1       full         full (+ shard offload)    2 · shard                 masters ? shard : 0
//   2       full         shard (+ shard offload)   2 · shard                 masters ? shard : 0
//   3       shard        shard (+ shard offload)   2 · shard                 masters ? shard : 0
//
// where Σ params is the unpadded sum of the parameters (stage 0 keeps each in its own tensor), full
// the padded buckets and shard this rank's part of them, each in its category's dtype: values in
// the parameters', gradients in the gradients' (f32 under mixed precision), moments, master
// weights and offload's host copy of the reduced gradient shard in the optimizer state's (f32 for
// bf16/f16 values, else the values').  Master weights are kept for 16-bit values (mixed
// precision) and by offload.  Temporaries (stage 3's gathered buckets while a unit runs, stage
// 2–3's full gradient buckets during backward) are not held between steps.
#include <cstdint>

#include "plan/bucket_plan.hpp"

namespace mdtp {

struct ZeroHeldBytes {
  std::int64_t parameters = 0;
  std::int64_t gradients = 0;
  std::int64_t optimizer_state = 0;
  std::int64_t master_weights = 0;
  bool operator==(const ZeroHeldBytes&) const = default;
};

// `moments`: the optimizer keeps two moments per element (AdamW); SGD keeps none.
ZeroHeldBytes zero_held_bytes(const BucketPlan& plan, int stage, bool offload, bool moments);

// The part of zero_held_bytes that offload keeps in host memory: the reduced gradient shard's copy,
// the moments and the master weights (zero without offload).  On a GPU these are not in device
// memory; on the host backend they share the one allocator with the rest.
ZeroHeldBytes zero_offloaded_bytes(const BucketPlan& plan, int stage, bool offload, bool moments);

// What stays in the training device's memory: zero_held_bytes less zero_offloaded_bytes.
ZeroHeldBytes zero_device_bytes(const BucketPlan& plan, int stage, bool offload, bool moments);

}  // namespace mdtp
