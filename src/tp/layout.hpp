#pragma once
// Layout: how a full 2-D tensor [rows, cols] is cut into one rank's shard.
//
// Every mode's activations and parameters are described the same way: the rows are split over an
// ordered list of mesh groups (coarse first), the columns over another, and the tensor is
// replicated over every other TP group.  The block index along rows is the mixed-radix number of
// this rank's position in each row group, e.g. 2.5D activations: rows over [tp.dep, tp.col]
// gives row block k·q + r.  Because the description is data, a single scatter/gather and a single
// LayerNorm serve all modes, and a layer checks the layout it receives instead of guessing.
#include <cstdint>
#include <string>
#include <vector>

#include "core/backend.hpp"

namespace mdtp {

class Mesh;

struct Layout {
  std::string name;                     // e.g. "2d", "3d.p0", "1d.hidden"
  std::vector<std::string> row_groups;  // coarse → fine
  std::vector<std::string> col_groups;  // coarse → fine
  bool operator==(const Layout& other) const {
    return row_groups == other.row_groups && col_groups == other.col_groups;
  }
};

struct ShardBlock {
  std::int64_t row_blocks = 1, row_index = 0, rows = 0;  // rows = rows of the shard
  std::int64_t col_blocks = 1, col_index = 0, cols = 0;
  std::int64_t row0() const { return row_index * rows; }  // first full row of the shard
  std::int64_t col0() const { return col_index * cols; }
};

// This rank's block of a full [rows, cols] tensor.  Throws a clear error when a dimension does not
// divide, naming `what`, the dimension, its size and the divisor needed.
ShardBlock shard_block(const Layout& layout, const Mesh& mesh, std::int64_t rows, std::int64_t cols,
                       const std::string& what);

// The full extents, from a shard's.
std::int64_t full_rows(const Layout& layout, const Mesh& mesh, std::int64_t shard_rows);
std::int64_t full_cols(const Layout& layout, const Mesh& mesh, std::int64_t shard_cols);

// Cuts this rank's shard out of a full tensor that every rank holds (no communication).
// A 1-D full tensor [n] is treated as [1, n].
Tensor scatter_full(const Tensor& full, const Layout& layout, const Mesh& mesh, const Backend& backend,
                    MemCategory category, const std::string& what = "tensor");

// Reassembles the full tensor on every rank from the shards (all-gather over the "tp" group,
// recorded in the ledger under the caller's phase), charged to `other`.  Used by checks, dumps and
// checkpoints, and in tests.
Tensor gather_full(const Tensor& shard, const Layout& layout, const Mesh& mesh, const Backend& backend,
                   std::int64_t full_row_count, std::int64_t full_col_count);

// The mesh group spanning several TP groups (e.g. {tp.col, tp.dep} → "tp.col-dep"); "" for none.
std::string spanning_group(std::vector<std::string> groups);

}  // namespace mdtp
