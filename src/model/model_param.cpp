#include "model/model_param.hpp"

#include <algorithm>

#include "mesh/mesh.hpp"

namespace mdtp {
namespace {

struct Extents {
  std::int64_t rows, cols, logical_rows;
};

Extents extents(const ModelParam& p) {
  const Shape& s = p.param->full_shape;
  const std::int64_t rows = s.size() == 1 ? 1 : s[0];
  return {rows, s.back(), p.logical_rows < 0 ? rows : p.logical_rows};
}

std::int64_t logical_col(const ModelParam& p, std::int64_t c) {
  return p.logical_columns.empty() ? c : p.logical_columns[static_cast<std::size_t>(c)];
}

// Index in the checkpoint tensor of stored element (r, c).
std::size_t checkpoint_index(const ModelParam& p, const Extents& e, std::int64_t r, std::int64_t c) {
  const std::int64_t lc = logical_col(p, c);
  return static_cast<std::size_t>(p.linear_weight ? lc * e.logical_rows + r : r * e.cols + lc);
}

}  // namespace

Shape ModelParam::checkpoint_shape() const {
  const Extents e = extents(*this);
  if (param->full_shape.size() == 1) return {e.cols};
  return linear_weight ? Shape{e.cols, e.logical_rows} : Shape{e.logical_rows, e.cols};
}

void initialize(const ModelParam& p, const Mesh& mesh, const Backend& backend, std::uint64_t seed) {
  const Extents e = extents(p);
  require(p.logical_columns.empty() || static_cast<std::int64_t>(p.logical_columns.size()) == e.cols, p.name(),
          ": ", p.logical_columns.size(), " logical column indices for ", e.cols, " columns");
  const ShardBlock b = shard_block(p.param->layout, mesh, e.rows, e.cols, p.name());
  Parameter& param = *p.param;
  std::vector<std::int64_t> columns(static_cast<std::size_t>(b.cols));
  for (std::int64_t j = 0; j < b.cols; ++j) columns[static_cast<std::size_t>(j)] = logical_col(p, b.col0() + j);
  bool identity = true;
  for (std::int64_t j = 0; j < b.cols; ++j) identity = identity && columns[static_cast<std::size_t>(j)] == b.col0() + j;
  // Rows [drawn_rows, b.rows) of the shard are padding (zero).
  const std::int64_t drawn_rows = std::clamp<std::int64_t>(e.logical_rows - b.row0(), 0, b.rows);
  const bool already_drawn = param.drawn && param.drawn->seed == seed && param.drawn->init == p.init && identity;
  param.drawn.reset();
  if (p.init.kind == InitSpec::Kind::constant) {
    backend.fill(param.value, p.init.value);
  } else if (!already_drawn) {
    const InitDraw draw(seed, p.name(), p.init);
    std::vector<double> values(static_cast<std::size_t>(b.rows * b.cols), 0.0);
    for (std::int64_t i = 0; i < drawn_rows; ++i)
      draw.fill((b.row0() + i) * e.cols, columns.data(), b.cols, param.value.dtype(), values.data() + i * b.cols);
    backend.assign_f64(param.value, values);
  }
  if (drawn_rows < b.rows && (already_drawn || p.init.kind == InitSpec::Kind::constant)) {
    Tensor padding = param.value.row_slice(drawn_rows, b.rows);
    backend.fill(padding, 0.0);
  }
  backend.fill(param.grad, 0.0);
}

std::vector<double> gather_logical(const ModelParam& p, const Tensor& shard, const Mesh& mesh, const Backend& backend) {
  const Extents e = extents(p);
  const std::vector<double> stored = backend.to_f64(gather_full(shard, p.param->layout, mesh, backend, e.rows, e.cols));
  std::vector<double> full(static_cast<std::size_t>(e.logical_rows * e.cols));
  for (std::int64_t r = 0; r < e.logical_rows; ++r)
    for (std::int64_t c = 0; c < e.cols; ++c) full[checkpoint_index(p, e, r, c)] = stored[static_cast<std::size_t>(r * e.cols + c)];
  return full;
}

void scatter_logical(const ModelParam& p, const std::vector<double>& full, Tensor& shard, const Mesh& mesh,
                     const Backend& backend) {
  const Extents e = extents(p);
  require(static_cast<std::int64_t>(full.size()) == e.logical_rows * e.cols, p.name(), ": ", full.size(),
          " values for shape ", shape_string(p.checkpoint_shape()));
  const ShardBlock b = shard_block(p.param->layout, mesh, e.rows, e.cols, p.name());
  std::vector<double> values(static_cast<std::size_t>(b.rows * b.cols), 0.0);
  for (std::int64_t i = 0; i < b.rows; ++i) {
    const std::int64_t r = b.row0() + i;
    if (r >= e.logical_rows) continue;
    for (std::int64_t j = 0; j < b.cols; ++j) values[static_cast<std::size_t>(i * b.cols + j)] = full[checkpoint_index(p, e, r, b.col0() + j)];
  }
  backend.assign_f64(shard, values);
}

}  // namespace mdtp
