#include "model/model_param.hpp"

#include <algorithm>

#include "mesh/mesh.hpp"

namespace mdtp {
namespace {

struct Extents {
  std::int64_t rows, cols, logical_rows, logical_cols;
};

Extents extents(const ModelParam& p) {
  const Shape& s = p.param->full_shape;
  const std::int64_t rows = s.size() == 1 ? 1 : s[0];
  return {rows, s.back(), p.logical_rows < 0 ? rows : p.logical_rows, p.logical_cols < 0 ? s.back() : p.logical_cols};
}

std::int64_t logical_col(const ModelParam& p, std::int64_t c) {
  return p.logical_columns.empty() ? c : p.logical_columns[static_cast<std::size_t>(c)];
}

// Index in the checkpoint tensor of stored element (r, c).
std::size_t checkpoint_index(const ModelParam& p, const Extents& e, std::int64_t r, std::int64_t c) {
  const std::int64_t lc = logical_col(p, c);
  return static_cast<std::size_t>(p.linear_weight ? lc * e.logical_rows + r : r * e.logical_cols + lc);
}

}  // namespace

Shape ModelParam::checkpoint_shape() const {
  const Extents e = extents(*this);
  if (param->full_shape.size() == 1) return {e.logical_cols};
  return linear_weight ? Shape{e.logical_cols, e.logical_rows} : Shape{e.logical_rows, e.logical_cols};
}

namespace {

// The logical column of each of the shard's columns.
std::vector<std::int64_t> shard_logical_columns(const ModelParam& p, const Extents& e, const ShardBlock& b) {
  require(p.logical_columns.empty() || static_cast<std::int64_t>(p.logical_columns.size()) == e.cols, p.name(),
          ": ", p.logical_columns.size(), " logical column indices for ", e.cols, " columns");
  std::vector<std::int64_t> columns(static_cast<std::size_t>(b.cols));
  for (std::int64_t j = 0; j < b.cols; ++j) columns[static_cast<std::size_t>(j)] = logical_col(p, b.col0() + j);
  return columns;
}

void check_range(const ModelParam& p, const ShardBlock& b, std::int64_t first, std::int64_t n) {
  require(first >= 0 && n >= 0 && first + n <= b.rows * b.cols, p.name(), ": elements [", first, ", ", first + n,
          ") of a shard of ", b.rows * b.cols);
}

}  // namespace

void initial_values(const ModelParam& p, const Mesh& mesh, std::uint64_t seed, DType stored, std::int64_t first,
                    std::int64_t n, double* out) {
  const Extents e = extents(p);
  const ShardBlock b = shard_block(p.param->layout, mesh, e.rows, e.cols, p.name());
  check_range(p, b, first, n);
  const std::vector<std::int64_t> columns = shard_logical_columns(p, e, b);
  const InitDraw draw(seed, p.name(), p.init);
  // Row by row of the shard, each row's part inside [first, first + n).
  for (std::int64_t k = first; k < first + n;) {
    const std::int64_t i = k / b.cols, j = k % b.cols, len = std::min(b.cols - j, first + n - k);
    double* o = out + (k - first);
    if (b.row0() + i >= e.logical_rows) std::fill(o, o + len, 0.0);  // padding
    else if (p.init.kind == InitSpec::Kind::constant) std::fill(o, o + len, p.init.value);
    else draw.fill((b.row0() + i) * e.logical_cols, columns.data() + j, len, stored, o);
    k += len;
  }
}

void initialize(const ModelParam& p, const Mesh& mesh, const Backend& backend, std::uint64_t seed) {
  const Extents e = extents(p);
  const ShardBlock b = shard_block(p.param->layout, mesh, e.rows, e.cols, p.name());
  Parameter& param = *p.param;
  const std::vector<std::int64_t> columns = shard_logical_columns(p, e, b);
  bool identity = true;
  for (std::int64_t j = 0; j < b.cols; ++j) identity = identity && columns[static_cast<std::size_t>(j)] == b.col0() + j;
  // Rows [drawn_rows, b.rows) of the shard are padding (zero).
  const std::int64_t drawn_rows = std::clamp<std::int64_t>(e.logical_rows - b.row0(), 0, b.rows);
  const bool already_drawn = param.drawn && param.drawn->seed == seed && param.drawn->init == p.init && identity;
  param.drawn.reset();
  if (p.init.kind == InitSpec::Kind::constant) {
    backend.fill(param.value, p.init.value);
  } else if (!already_drawn && param.value.holds_values()) {  // a synthetic tensor draws nothing
    assign_drawn(backend, param.value, b.cols, mesh.occupancy().cores_per_rank(),
                 [&](std::int64_t first, std::int64_t n, double* out) {
      initial_values(p, mesh, seed, param.value.dtype(), first, n, out);
    });
  }
  if (drawn_rows < b.rows && (already_drawn || p.init.kind == InitSpec::Kind::constant)) {
    Tensor padding = param.value.row_slice(drawn_rows, b.rows);
    backend.fill(padding, 0.0);
  }
  backend.fill(param.grad, 0.0);
}

void checkpoint_values(const ModelParam& p, const Mesh& mesh, std::int64_t first, std::int64_t n,
                       const CheckpointBlockReader& read, double* out) {
  const Extents e = extents(p);
  const ShardBlock b = shard_block(p.param->layout, mesh, e.rows, e.cols, p.name());
  check_range(p, b, first, n);
  std::fill(out, out + n, 0.0);
  if (n == 0) return;
  const std::vector<std::int64_t> columns = shard_logical_columns(p, e, b);
  // The shard rows [i0, i1) the range covers, and the stored rows [r0, r1) of them that are not padding.
  const std::int64_t i0 = first / b.cols, i1 = (first + n - 1) / b.cols + 1;
  const std::int64_t r0 = b.row0() + i0, r1 = std::min(b.row0() + i1, e.logical_rows);
  if (r1 <= r0) return;
  const std::int64_t rows = r1 - r0;
  std::vector<double> tile(static_cast<std::size_t>((i1 - i0) * b.cols), 0.0);  // shard rows [i0, i1)
  for (std::int64_t j0 = 0; j0 < b.cols;) {
    // A run of shard columns whose logical columns are consecutive: one block of the checkpoint.
    std::int64_t len = 1;
    while (j0 + len < b.cols && columns[static_cast<std::size_t>(j0 + len)] == columns[static_cast<std::size_t>(j0)] + len)
      ++len;
    const std::int64_t lc0 = columns[static_cast<std::size_t>(j0)];
    // Linear weights are stored [in, out] and checkpointed [out, in]: the block is transposed.
    const std::vector<double> block = p.linear_weight ? read(lc0, len, r0, rows) : read(r0, rows, lc0, len);
    require(static_cast<std::int64_t>(block.size()) == rows * len, p.name(), ": a checkpoint block of ", block.size(),
            " values; expected ", rows * len);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t k = 0; k < len; ++k)
        tile[static_cast<std::size_t>(r * b.cols + j0 + k)] =
            block[static_cast<std::size_t>(p.linear_weight ? k * rows + r : r * len + k)];
    j0 += len;
  }
  const std::int64_t skip = first - i0 * b.cols;
  std::copy(tile.begin() + skip, tile.begin() + skip + n, out);
}

std::vector<double> gather_logical(const ModelParam& p, const Tensor& shard, const Mesh& mesh, const Backend& backend) {
  const Extents e = extents(p);
  const std::vector<double> stored = backend.to_f64(gather_full(shard, p.param->layout, mesh, backend, e.rows, e.cols));
  // Copies of a replicated column (logical_columns repeats it) write the same values twice.
  std::vector<double> full(static_cast<std::size_t>(e.logical_rows * e.logical_cols));
  for (std::int64_t r = 0; r < e.logical_rows; ++r)
    for (std::int64_t c = 0; c < e.cols; ++c) full[checkpoint_index(p, e, r, c)] = stored[static_cast<std::size_t>(r * e.cols + c)];
  return full;
}

void scatter_logical(const ModelParam& p, const std::vector<double>& full, Tensor& shard, const Mesh& mesh,
                     const Backend& backend) {
  const Extents e = extents(p);
  require(static_cast<std::int64_t>(full.size()) == e.logical_rows * e.logical_cols, p.name(), ": ", full.size(),
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
