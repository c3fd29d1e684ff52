#include "mesh/rank_generator.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace mdtp {

namespace {

// The axes an order may name.  Missing size-1 axes are appended in Megatron's dictionary order
// (tp, pp, dp, cp), so the effective order string matches Megatron's for the same input.
const std::vector<std::string> kAppendOrder = {"tp", "pp", "dp", "cp"};

bool known_axis(const std::string& axis) {
  return std::find(kAppendOrder.begin(), kAppendOrder.end(), axis) != kAppendOrder.end();
}

// Mixed-radix digits of `index` over `shape` (first digit fastest).
std::vector<int> decompose(int index, const std::vector<int>& shape) {
  std::vector<int> digits(shape.size());
  for (std::size_t a = 0; a < shape.size(); ++a) {
    digits[a] = index % shape[a];
    index /= shape[a];
  }
  return digits;
}

}  // namespace

std::vector<std::string> split_token(const std::string& token) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    std::size_t dash = token.find('-', start);
    parts.push_back(token.substr(start, dash == std::string::npos ? std::string::npos : dash - start));
    if (dash == std::string::npos) break;
    start = dash + 1;
  }
  return parts;
}

RankGenerator::RankGenerator(int tp, int cp, int dp, int pp, const std::string& order) {
  const std::pair<const char*, int> given[] = {{"tp", tp}, {"cp", cp}, {"dp", dp}, {"pp", pp}};
  for (const auto& [name, size] : given)
    require(size >= 1, "mesh axis sizes must be >= 1; got ", name, "=", size);
  auto size_named = [&](const std::string& axis) {
    for (const auto& [name, size] : given)
      if (axis == name) return size;
    return 0;
  };

  require(!order.empty(), "the mesh order is empty; expected axes joined by '-', e.g. tp-cp-dp-pp");
  for (const auto& axis : split_token(order)) {
    require(known_axis(axis), "unknown axis '", axis, "' in order '", order,
            "'; expected tp, cp, dp or pp joined by '-'");
    require(std::find(axes_.begin(), axes_.end(), axis) == axes_.end(), "axis '", axis,
            "' appears more than once in order '", order, "'");
    axes_.push_back(axis);
  }
  for (const auto& axis : kAppendOrder) {
    if (std::find(axes_.begin(), axes_.end(), axis) != axes_.end()) continue;
    require(size_named(axis) == 1, "order '", order, "' does not list axis ", axis, " of size ",
            size_named(axis), "; every axis of size > 1 must appear in the order");
    axes_.push_back(axis);
  }
  for (const auto& axis : axes_) {
    strides_.push_back(world_);
    sizes_.push_back(size_named(axis));
    world_ *= sizes_.back();
  }
}

std::string RankGenerator::order() const {
  std::string out;
  for (const auto& axis : axes_) out += (out.empty() ? "" : "-") + axis;
  return out;
}

int RankGenerator::axis_index(const std::string& axis, const std::string& context) const {
  auto it = std::find(axes_.begin(), axes_.end(), axis);
  require(it != axes_.end(), "unknown axis '", axis, "' in ", context, "; expected tp, cp, dp or pp");
  return static_cast<int>(it - axes_.begin());
}

int RankGenerator::size_of(const std::string& axis) const {
  return sizes_[axis_index(axis, "size_of")];
}

int RankGenerator::coord(int rank, const std::string& axis) const {
  require(rank >= 0 && rank < world_, "rank ", rank, " is outside the mesh of ", world_, " ranks");
  int a = axis_index(axis, "coord");
  return rank / strides_[a] % sizes_[a];
}

std::vector<std::string> RankGenerator::token_axes(const std::string& token) const {
  std::vector<bool> mask(axes_.size(), false);
  for (const auto& axis : split_token(token)) {
    int a = axis_index(axis, "group token '" + token + "'");
    require(!mask[a], "axis '", axis, "' appears more than once in group token '", token, "'");
    mask[a] = true;
  }
  std::vector<std::string> out;
  for (std::size_t a = 0; a < axes_.size(); ++a)
    if (mask[a]) out.push_back(axes_[a]);
  return out;
}

// Megatron's generate_masked_orthogonal_rank_groups: group index decomposed over the unmasked
// sizes, rank-in-group over the masked sizes, rank = Σ digit·stride over both.
std::vector<std::vector<int>> RankGenerator::groups(const std::string& token) const {
  std::vector<bool> mask(axes_.size(), false);
  for (const auto& axis : token_axes(token)) mask[axis_index(axis, token)] = true;

  std::vector<int> masked_shape, masked_stride, unmasked_shape, unmasked_stride;
  for (std::size_t a = 0; a < axes_.size(); ++a) {
    (mask[a] ? masked_shape : unmasked_shape).push_back(sizes_[a]);
    (mask[a] ? masked_stride : unmasked_stride).push_back(strides_[a]);
  }
  int group_size = 1;
  for (int s : masked_shape) group_size *= s;
  int group_count = world_ / group_size;

  std::vector<std::vector<int>> out(group_count);
  for (int g = 0; g < group_count; ++g) {
    std::vector<int> gd = decompose(g, unmasked_shape);
    int base = 0;
    for (std::size_t a = 0; a < gd.size(); ++a) base += gd[a] * unmasked_stride[a];
    out[g].reserve(group_size);
    for (int m = 0; m < group_size; ++m) {
      std::vector<int> md = decompose(m, masked_shape);
      int rank = base;
      for (std::size_t a = 0; a < md.size(); ++a) rank += md[a] * masked_stride[a];
      out[g].push_back(rank);
    }
  }
  return out;
}

}  // namespace mdtp
