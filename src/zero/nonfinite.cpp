#include "zero/nonfinite.hpp"

#include <algorithm>
#include <cmath>

#include "core/convert.hpp"
#include "core/error.hpp"

namespace mdtp {
namespace {

template <class T>
std::int64_t first_in(const T* data, std::int64_t begin, std::int64_t end) {
  for (std::int64_t i = begin; i < end; ++i)
    if (!std::isfinite(data[i])) return i;
  return -1;
}

// The first non-finite index in [begin, end) of `values`, or -1; its value in `value`.
std::int64_t first_in_range(const Tensor& values, std::int64_t begin, std::int64_t end, double& value) {
  require(values.device() == DeviceKind::host, "the non-finite search reads host tensors; got a ",
          device_name(values.device()), " tensor");
  std::int64_t at = -1;
  if (values.dtype() == DType::f32) {
    at = first_in(values.data<float>(), begin, end);
    if (at >= 0) value = values.data<float>()[at];
  } else if (values.dtype() == DType::f64) {
    at = first_in(values.data<double>(), begin, end);
    if (at >= 0) value = values.data<double>()[at];
  } else {  // bf16/f16: widened a block at a time (exact)
    float block[1024];
    const auto* raw = static_cast<const unsigned char*>(values.raw_data());
    for (std::int64_t i0 = begin; i0 < end && at < 0; i0 += 1024) {
      const std::int64_t n = std::min<std::int64_t>(1024, end - i0);
      widen_to_f32(values.dtype(), raw + i0 * 2, block, static_cast<std::size_t>(n));
      const std::int64_t j = first_in(block, 0, n);
      if (j >= 0) {
        at = i0 + j;
        value = block[j];
      }
    }
  }
  return at;
}

}  // namespace

const char* nonfinite_name(double value) {
  if (std::isnan(value)) return "NaN";
  return value > 0 ? "+Inf" : "-Inf";
}

std::int64_t first_nonfinite_index(const Tensor& values) {
  double value = 0;
  return values.defined() ? first_in_range(values, 0, values.numel(), value) : -1;
}

std::optional<NonFiniteHit> first_nonfinite(const std::vector<std::pair<std::string, Tensor>>& named) {
  for (const auto& [name, values] : named) {
    if (!values.defined()) continue;
    double value = 0;
    const std::int64_t at = first_in_range(values, 0, values.numel(), value);
    if (at >= 0) return NonFiniteHit{name, at, value};
  }
  return std::nullopt;
}

std::optional<NonFiniteHit> first_nonfinite_in_shard(const Tensor& shard, const std::vector<ShardSegment>& segments,
                                                     const std::vector<std::string>& names) {
  // Segments are searched in shard order, so "first" means first in the shard.
  std::vector<const ShardSegment*> ordered;
  for (const auto& s : segments) ordered.push_back(&s);
  std::sort(ordered.begin(), ordered.end(),
            [](const ShardSegment* a, const ShardSegment* b) { return a->shard_offset < b->shard_offset; });
  for (const ShardSegment* s : ordered) {
    require(s->shard_offset >= 0 && s->numel >= 0 && s->shard_offset + s->numel <= shard.numel(),
            "a shard segment of ", s->numel, " elements at ", s->shard_offset, " lies outside the shard of ",
            shard.numel(), " elements");
    require(s->param < names.size(), "a shard segment names parameter ", s->param, " of ", names.size());
    double value = 0;
    const std::int64_t at = first_in_range(shard, s->shard_offset, s->shard_offset + s->numel, value);
    if (at >= 0) return NonFiniteHit{names[s->param], s->param_offset + (at - s->shard_offset), value};
  }
  return std::nullopt;
}

}  // namespace mdtp
