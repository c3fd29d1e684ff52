#pragma once
// Finding the first non-finite gradient element (NaN, +Inf, -Inf) and the parameter that holds
// it, so that a run which stops on a non-finite gradient norm can say where it came from.
//
// Searched only once the (all-reduced) gradient norm is non-finite, so normal steps pay nothing.
// Local: no communication — the trainer agrees across ranks on which find to name.
//  - unsharded: the parameters' own gradient tensors, in the order given;
//  - ZeRO: a bucket's gradient shard, mapped back to parameters through the layout's
//    ShardSegments (padding between and after parameters is never named).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.hpp"
#include "zero/zero_layout.hpp"

namespace mdtp {

struct NonFiniteHit {
  std::string tensor;        // the parameter's name
  std::int64_t element = 0;  // row-major index inside this rank's piece of the parameter
  double value = 0;          // NaN, +Inf or -Inf
};

// The index of the first non-finite element of `values` (a host tensor of f32 or f64), or -1.
std::int64_t first_nonfinite_index(const Tensor& values);

// Unsharded: the first element, in the order given, of the first tensor holding one.
std::optional<NonFiniteHit> first_nonfinite(const std::vector<std::pair<std::string, Tensor>>& named);

// ZeRO: the first non-finite element of a bucket's gradient shard that belongs to a parameter
// (`segments` = ZeroLayout::segments(bucket, shard rank)), named by `names` (indexed by
// ShardSegment::param, i.e. ZeroLayout::params() order).
std::optional<NonFiniteHit> first_nonfinite_in_shard(const Tensor& shard, const std::vector<ShardSegment>& segments,
                                                     const std::vector<std::string>& names);

// "NaN", "+Inf", "-Inf".
const char* nonfinite_name(double value);

}  // namespace mdtp
