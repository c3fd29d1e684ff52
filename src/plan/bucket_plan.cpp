#include "plan/bucket_plan.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "core/error.hpp"

namespace mdtp {
namespace {

std::int64_t round_up(std::int64_t n, std::int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// What makes two parameters share a bucket.
struct Kind {
  std::vector<std::string> partial_groups;
  std::string shard_group;
  int shards;
  bool decays;
  DType dtype, grad_dtype;
  int unit;  // -1 unless unit_aligned
  auto operator<=>(const Kind&) const = default;
};

// The widest of a parameter's buffers sets its elements' alignment.
std::int64_t widest(DType a, DType b) { return static_cast<std::int64_t>(std::max(dtype_size(a), dtype_size(b))); }

template <class Bytes>
std::int64_t total(const std::vector<Bucket>& buckets, Bytes bytes) {
  std::int64_t sum = 0;
  for (const Bucket& b : buckets) sum += (b.*bytes)();
  return sum;
}

}  // namespace

DType optimizer_state_dtype(DType dtype) { return is_16bit(dtype) ? DType::f32 : dtype; }

std::int64_t BucketPlan::padded_value_bytes() const { return total(buckets, &Bucket::value_bytes); }
std::int64_t BucketPlan::padded_grad_bytes() const { return total(buckets, &Bucket::grad_bytes); }
std::int64_t BucketPlan::value_shard_bytes() const { return total(buckets, &Bucket::value_shard_bytes); }
std::int64_t BucketPlan::grad_shard_bytes() const { return total(buckets, &Bucket::grad_shard_bytes); }
std::int64_t BucketPlan::state_shard_bytes() const { return total(buckets, &Bucket::state_shard_bytes); }

std::int64_t bucket_cap_bytes(double bucket_mb) {
  require(std::isfinite(bucket_mb) && bucket_mb > 0.0, "the ZeRO bucket size must be a positive number of MiB; got bucket_mb=",
          bucket_mb);
  require(bucket_mb < 1048576.0, "the ZeRO bucket size must be below 1 TiB; got bucket_mb=", bucket_mb);
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(bucket_mb * 1048576.0));
}

BucketPlan plan_buckets(const std::vector<BucketInput>& params, const BucketOptions& options) {
  require(options.dp >= 1, "bucket plan: dp must be >= 1; got dp=", options.dp);
  require(options.cap_bytes > 0, "bucket plan: the bucket cap must be positive; got cap_bytes=", options.cap_bytes);
  require(options.align_bytes > 0, "bucket plan: the alignment must be positive; got align_bytes=", options.align_bytes);
  for (const BucketInput& p : params) {
    const std::int64_t size = widest(p.dtype, p.gradient_dtype());
    require(p.numel > 0, "bucket plan: parameter ", p.name, " has ", p.numel, " elements; expected at least one");
    require(p.shards >= 0 && (p.shards == 0) == p.shard_group.empty(), "bucket plan: parameter ", p.name,
            " is sharded over '", p.shard_group, "' of ", p.shards,
            " ranks; expected a named group of at least one rank, or none and 0");
    require(options.align_bytes % size == 0, "bucket plan: align_bytes=", options.align_bytes,
            " is not a multiple of the ", size, "-byte elements of ", p.name, " (", dtype_name(p.dtype), ", gradients ",
            dtype_name(p.gradient_dtype()), ")");
  }

  // Backward order: units descending, the given order inside a unit.
  std::vector<std::size_t> order(params.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return params[a].unit > params[b].unit; });

  BucketPlan plan;
  plan.options = options;
  plan.place.resize(params.size());
  std::map<Kind, std::size_t> open;  // the bucket each kind is filling
  int current_unit = order.empty() ? 0 : params[order.front()].unit;
  for (std::size_t i : order) {
    const BucketInput& p = params[i];
    if (options.unit_aligned && p.unit != current_unit) open.clear();
    current_unit = p.unit;
    const int shards = p.shard_group.empty() ? options.dp : p.shards;
    const Kind kind{p.partial_groups, p.shard_group, shards,   p.decays,
                    p.dtype,          p.gradient_dtype(), options.unit_aligned ? p.unit : -1};
    const auto size = static_cast<std::int64_t>(dtype_size(p.gradient_dtype()));  // the cap counts gradients
    const std::int64_t align = options.align_bytes / widest(p.dtype, p.gradient_dtype());
    auto it = open.find(kind);
    if (it != open.end()) {
      const Bucket& b = plan.buckets[it->second];
      if ((round_up(b.used, align) + p.numel) * size > options.cap_bytes) {
        open.erase(it);
        it = open.end();
      }
    }
    if (it == open.end()) {
      Bucket b;
      b.partial_groups = p.partial_groups;
      b.shard_group = p.shard_group;
      b.shards = shards;
      b.decays = p.decays;
      b.dtype = p.dtype;
      b.grad_dtype = p.gradient_dtype();
      plan.buckets.push_back(std::move(b));
      it = open.emplace(kind, plan.buckets.size() - 1).first;
    }
    Bucket& b = plan.buckets[it->second];
    const std::int64_t offset = round_up(b.used, align);
    plan.place[i] = BucketPlace{it->second, b.slots.size()};
    b.slots.push_back(BucketSlot{i, offset, p.numel});
    b.used = offset + p.numel;
    if (std::find(b.units.begin(), b.units.end(), p.unit) == b.units.end()) b.units.push_back(p.unit);
  }
  for (Bucket& b : plan.buckets) {
    const std::int64_t align = options.align_bytes / widest(b.dtype, b.grad_dtype);
    b.padded = round_up(b.used, align * b.shards);
    b.shard = b.padded / b.shards;
  }
  return plan;
}

void fold_replica_group(std::vector<BucketInput>& params, const std::string& replica_group, int replica_size,
                        const std::string& combined_group, int dp) {
  require(replica_size >= 1 && dp >= 1, "bucket plan: a replica group of ", replica_size, " ranks over dp=", dp,
          "; expected both >= 1");
  if (replica_size == 1) return;
  for (BucketInput& p : params) {
    auto it = std::find(p.partial_groups.begin(), p.partial_groups.end(), replica_group);
    if (it == p.partial_groups.end()) continue;
    p.partial_groups.erase(it);
    p.shard_group = combined_group;
    p.shards = dp * replica_size;
  }
}

}  // namespace mdtp
