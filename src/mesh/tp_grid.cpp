#include "mesh/tp_grid.hpp"

#include <algorithm>
#include <map>

#include "core/error.hpp"
#include "spec/names.hpp"

namespace mdtp {

namespace {

// Exact integer root: the q with q^n == value, or -1.
int exact_root(int value, int n) {
  for (int q = 1;; ++q) {
    long long power = 1;
    for (int e = 0; e < n; ++e) power *= q;
    if (power == value) return q;
    if (power > value) return -1;
  }
}

}  // namespace

const char* tp_grid_kind_name(TpGridKind kind) {
  switch (kind) {
    case TpGridKind::d1: return "1d";
    case TpGridKind::d2: return "2d";
    case TpGridKind::d2p5: return "2.5d";
    case TpGridKind::d3: return "3d";
  }
  return "?";
}

TpGrid::TpGrid(TpGridKind kind, int tp, int depth) : kind_(kind), tp_(tp), q_(tp), depth_(depth) {
  require(tp >= 1, "TP size must be >= 1; got tp=", tp);
  require(depth >= 1, "TP depth must be >= 1; got tp_depth=", depth);
  require(depth == 1 || kind == TpGridKind::d2p5, "TP depth applies only to 2.5D tensor parallelism; got tp_depth=",
          depth, " with TP mode ", tp_grid_kind_name(kind));
  switch (kind) {
    case TpGridKind::d1:
      axes_ = {{"t", tp, 1}};
      groups_ = {{group::tp, {"t"}}};
      break;
    case TpGridKind::d2:
      q_ = exact_root(tp, 2);
      require(q_ > 0, "2D tensor parallelism needs a square TP size; got tp=", tp);
      axes_ = {{"c", q_, 1}, {"r", q_, q_}};
      groups_ = {{group::tp, {"c", "r"}}, {group::tp_row, {"c"}}, {group::tp_col, {"r"}}};
      break;
    case TpGridKind::d2p5:
      q_ = tp % depth == 0 ? exact_root(tp / depth, 2) : -1;
      require(q_ > 0, "2.5D tensor parallelism needs tp = d*q^2 for an integer q, d being the TP depth; got tp=", tp,
              ", d=", depth);
      axes_ = {{"c", q_, 1}, {"r", q_, q_}, {"k", depth, q_ * q_}};
      groups_ = {{group::tp, {"c", "r", "k"}}, {group::tp_row, {"c"}},          {group::tp_col, {"r"}},
                 {group::tp_dep, {"k"}},       {group::tp_row_dep, {"c", "k"}}, {group::tp_col_dep, {"r", "k"}}};
      break;
    case TpGridKind::d3:
      q_ = exact_root(tp, 3);
      require(q_ > 0, "3D tensor parallelism needs a cubic TP size; got tp=", tp);
      axes_ = {{"i", q_, 1}, {"j", q_, q_}, {"k", q_, q_ * q_}};
      groups_ = {{group::tp, {"i", "j", "k"}},          {group::tp_input, {"i"}},
                 {group::tp_weight, {"j"}},             {group::tp_output, {"k"}},
                 {group::tp_input_weight, {"i", "j"}},  {group::tp_output_weight, {"j", "k"}}};
      break;
  }
}

int TpGrid::axis_index(const std::string& axis) const {
  for (std::size_t a = 0; a < axes_.size(); ++a)
    if (axes_[a].name == axis) return static_cast<int>(a);
  std::string known;
  for (const auto& a : axes_) known += " " + a.name;
  throw_error("the ", tp_grid_kind_name(kind_), " TP grid has no axis '", axis, "'; its axes are:", known);
}

int TpGrid::coord(int t, const std::string& axis) const {
  require(t >= 0 && t < tp_, "TP rank ", t, " is outside the TP group of size ", tp_);
  const Axis& a = axes_[axis_index(axis)];
  return t / a.stride % a.size;
}

TpCoords TpGrid::coords(int t) const {
  TpCoords out;
  switch (kind_) {
    case TpGridKind::d1: break;
    case TpGridKind::d2: out.r = coord(t, "r"); out.c = coord(t, "c"); break;
    case TpGridKind::d2p5: out.r = coord(t, "r"); out.c = coord(t, "c"); out.k = coord(t, "k"); break;
    case TpGridKind::d3: out.i = coord(t, "i"); out.j = coord(t, "j"); out.k = coord(t, "k"); break;
  }
  return out;
}

int TpGrid::rank_of(const TpCoords& c) const {
  switch (kind_) {
    case TpGridKind::d1: return 0;
    case TpGridKind::d2: return c.r * q_ + c.c;
    case TpGridKind::d2p5: return c.c + q_ * c.r + q_ * q_ * c.k;
    case TpGridKind::d3: return c.i + q_ * c.j + q_ * q_ * c.k;
  }
  return 0;
}

std::vector<std::string> TpGrid::group_names() const {
  std::vector<std::string> out;
  for (const auto& g : groups_) out.push_back(g.first);
  return out;
}

std::vector<std::string> TpGrid::varying_axes(const std::string& name) const {
  for (const auto& g : groups_)
    if (g.first == name) return g.second;
  std::string known;
  for (const auto& g : groups_) known += " " + g.first;
  throw_error("unknown TP group '", name, "' for TP mode ", tp_grid_kind_name(kind_), "; expected one of:", known);
}

std::vector<std::vector<int>> TpGrid::local_groups(const std::string& name) const {
  std::vector<std::string> varying = varying_axes(name);
  // Key of a rank = its coordinates on the fixed axes; walking t upwards makes the members of
  // each group ascending and the groups ordered by their lowest member.
  std::map<std::vector<int>, std::size_t> index;
  std::vector<std::vector<int>> out;
  for (int t = 0; t < tp_; ++t) {
    std::vector<int> key;
    for (const auto& a : axes_)
      if (std::find(varying.begin(), varying.end(), a.name) == varying.end()) key.push_back(t / a.stride % a.size);
    auto [it, inserted] = index.emplace(key, out.size());
    if (inserted) out.emplace_back();
    out[it->second].push_back(t);
  }
  return out;
}

}  // namespace mdtp
