#pragma once
// The ZeRO bucket plan (docs/zero.md §2): where each parameter (and its gradient) lives in flat
// buffers that one data-parallel collective moves at a time.  A pure function of the parameter
// list, so that the engine (src/zero) and the cost model place the same bytes.
//
//  - Order.  Parameters are placed as backward completes them: units in descending order (the
//    head, blocks L … 1, the embedding), each unit's parameters in the given order.
//  - Homogeneity.  A bucket holds parameters that need the same reduction and update: the same
//    partial-sum groups (the engine all-reduces a whole shard over them), the same weight-decay
//    flag (one AdamW call per shard) and the same dtypes (one collective per bucket).  Buckets of
//    different kinds are filled side by side, each in backward order.
//  - Dtypes.  A bucket's values have the parameters' dtype and its gradients the gradients' (f32
//    for bf16/f16 parameters under mixed precision); its optimizer state — moments and master
//    weights — is f32 for 16-bit values, else the values' dtype.  Layouts are in elements, the
//    same for all three.
//  - Size.  A bucket is closed when the next parameter would take its gradients over the cap (the
//    bytes one reduction moves); a parameter
//    larger than the cap gets a bucket of its own (parameters are never split, so every rank that
//    holds a parameter with the same neighbours lays it out the same way).
//  - Alignment.  Every parameter starts at a multiple of `align_bytes` inside its bucket (of its
//    widest buffer), and the bucket is padded to a multiple of dp · align, then cut into dp equal
//    contiguous shards, so every shard also starts aligned.  Padding is zero and never read by a
//    layer.
//  - Units.  With `unit_aligned` (ZeRO-3) no bucket spans two units, so gathering one unit's
//    buckets never materialises another unit's parameters.
//  - Shard groups.  A bucket is cut over the data-parallel group, or over a wider group in which
//    the parameter is also a data-parallel replica (2.5D weights: dp × depth, see
//    fold_replica_group).  The shard group is part of a bucket's kind.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace mdtp {

// One parameter as the plan sees it.
struct BucketInput {
  std::string name;
  std::int64_t numel = 0;  // elements this rank holds (its tensor-parallel shard)
  // Groups of more than one rank over which its gradient is partial (summed on the shards).
  std::vector<std::string> partial_groups;
  bool decays = false;
  DType dtype = DType::f32;
  int unit = 0;  // 0 = embedding, 1 … L = blocks, L + 1 = head
  // The group its bucket is sharded over and its size: empty and 0 for the data-parallel group
  // (BucketOptions::dp shards).
  std::string shard_group;
  int shards = 0;
  // The gradients' dtype; the values' (`dtype`) unless set.
  std::optional<DType> grad_dtype;
  DType gradient_dtype() const { return grad_dtype.value_or(dtype); }
};

// The optimizer state's dtype for values of `dtype`: f32 master weights and moments for bf16/f16
// values (mixed precision), else the values' own.
DType optimizer_state_dtype(DType dtype);

struct BucketOptions {
  int dp = 1;                             // shards per bucket
  std::int64_t cap_bytes = 25ll << 20;    // a bucket's size limit (before padding)
  std::int64_t align_bytes = 64;          // parameter and shard starts
  bool unit_aligned = false;              // no bucket spans two units (stage 3)
};

// A parameter's place in its bucket, in elements.
struct BucketSlot {
  std::size_t param = 0;  // index in the input list
  std::int64_t offset = 0;
  std::int64_t numel = 0;
};

struct Bucket {
  std::vector<std::string> partial_groups;
  std::string shard_group;  // empty: the data-parallel group
  int shards = 1;           // ranks it is cut over (BucketOptions::dp, or the shard group's size)
  bool decays = false;
  DType dtype = DType::f32;       // the values'
  DType grad_dtype = DType::f32;  // the gradients'
  std::vector<BucketSlot> slots;  // in placement order
  std::vector<int> units;         // the distinct units of its parameters, descending
  std::int64_t used = 0;          // end of the last slot
  std::int64_t padded = 0;        // elements: `used` rounded up to a multiple of shards · align
  std::int64_t shard = 0;         // padded / shards
  DType state_dtype() const { return optimizer_state_dtype(dtype); }
  std::int64_t value_bytes() const { return padded * static_cast<std::int64_t>(dtype_size(dtype)); }
  std::int64_t value_shard_bytes() const { return shard * static_cast<std::int64_t>(dtype_size(dtype)); }
  std::int64_t grad_bytes() const { return padded * static_cast<std::int64_t>(dtype_size(grad_dtype)); }
  std::int64_t grad_shard_bytes() const { return shard * static_cast<std::int64_t>(dtype_size(grad_dtype)); }
  // One shard of one optimizer-state tensor (a moment, or the master weights).
  std::int64_t state_shard_bytes() const { return shard * static_cast<std::int64_t>(dtype_size(state_dtype())); }
};

struct BucketPlace {
  std::size_t bucket = 0, slot = 0;
};

struct BucketPlan {
  BucketOptions options;
  std::vector<Bucket> buckets;     // in the order they were opened (backward order)
  std::vector<BucketPlace> place;  // per input parameter
  // Σ over the buckets: one full copy of every bucket's values or gradients, and what one rank
  // owns of its values, gradients and of one optimizer-state tensor.
  std::int64_t padded_value_bytes() const;
  std::int64_t padded_grad_bytes() const;
  std::int64_t value_shard_bytes() const;
  std::int64_t grad_shard_bytes() const;
  std::int64_t state_shard_bytes() const;
  // The bucket holding input parameter `param`.
  const Bucket& bucket_of(std::size_t param) const { return buckets.at(place.at(param).bucket); }
};

// MiB (the `bucket_mb` option) → bytes; an mdtp::Error unless positive and finite.
std::int64_t bucket_cap_bytes(double bucket_mb);

// Treats `replica_group` (of `replica_size` ranks) as data-parallel for every parameter whose
// gradient is partial over it: the group leaves its partial groups, and its bucket is sharded over
// `combined_group` (data-parallel × replica, dp · replica_size ranks) instead.  The value of such a
// parameter is identical over the group and its gradient is a sum over it, exactly what holds over
// dp, so one reduce-scatter over the product replaces a reduce-scatter over dp and an all-reduce
// of the shard over the group, and each shard (with its optimizer state) is replica_size× smaller.
// For 2.5D: fold_replica_group(params, "tp.dep", d, "dp-tp.dep", dp).  A replica group of one
// rank changes nothing.
void fold_replica_group(std::vector<BucketInput>& params, const std::string& replica_group, int replica_size,
                        const std::string& combined_group, int dp);

// An mdtp::Error naming the value: dp < 1, cap ≤ 0, an alignment that is not a positive multiple
// of every parameter's element size, or a parameter without elements.
BucketPlan plan_buckets(const std::vector<BucketInput>& params, const BucketOptions& options);

}  // namespace mdtp
