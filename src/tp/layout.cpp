#include "tp/layout.hpp"

#include <algorithm>
#include <map>

#include "mesh/mesh.hpp"
#include "spec/names.hpp"

namespace mdtp {
namespace {

struct AxisPosition {
  std::int64_t blocks = 1, index = 0;
};

// Mixed-radix position of `global_rank` over `groups` (coarse first).
AxisPosition position_over(const std::vector<std::string>& groups, const Mesh& mesh, int global_rank) {
  AxisPosition p;
  for (const auto& name : groups) {
    const std::vector<int> members = mesh.topology().group_of(name, global_rank);
    auto it = std::find(members.begin(), members.end(), global_rank);
    p.index = p.index * static_cast<std::int64_t>(members.size()) + (it - members.begin());
    p.blocks *= static_cast<std::int64_t>(members.size());
  }
  return p;
}

std::int64_t block_count(const std::vector<std::string>& groups, const Mesh& mesh) {
  std::int64_t n = 1;
  for (const auto& name : groups) n *= mesh.comm(name).size();
  return n;
}

std::string joined(const std::vector<std::string>& groups) {
  std::string s;
  for (const auto& g : groups) s += (s.empty() ? "" : "×") + g;
  return s;
}

}  // namespace

ShardBlock shard_block(const Layout& layout, const Mesh& mesh, std::int64_t rows, std::int64_t cols,
                       const std::string& what) {
  ShardBlock b;
  AxisPosition r = position_over(layout.row_groups, mesh, mesh.rank());
  AxisPosition c = position_over(layout.col_groups, mesh, mesh.rank());
  require(rows % r.blocks == 0, what, ": dimension 0 of size ", rows, " must be divisible by ", r.blocks,
          " (split over ", joined(layout.row_groups), " in layout ", layout.name, ")");
  require(cols % c.blocks == 0, what, ": dimension 1 of size ", cols, " must be divisible by ", c.blocks,
          " (split over ", joined(layout.col_groups), " in layout ", layout.name, ")");
  b.row_blocks = r.blocks;
  b.row_index = r.index;
  b.rows = rows / r.blocks;
  b.col_blocks = c.blocks;
  b.col_index = c.index;
  b.cols = cols / c.blocks;
  return b;
}

std::int64_t full_rows(const Layout& layout, const Mesh& mesh, std::int64_t shard_rows) {
  return shard_rows * block_count(layout.row_groups, mesh);
}

std::int64_t full_cols(const Layout& layout, const Mesh& mesh, std::int64_t shard_cols) {
  return shard_cols * block_count(layout.col_groups, mesh);
}

Tensor scatter_full(const Tensor& full, const Layout& layout, const Mesh& mesh, const Backend& backend,
                    MemCategory category, const std::string& what) {
  const bool vector = full.ndim() == 1;
  const std::int64_t rows = vector ? 1 : full.rows(), cols = full.cols();
  ShardBlock b = shard_block(layout, mesh, rows, cols, what);
  Shape shape = vector ? Shape{b.cols} : Shape{b.rows, b.cols};
  Tensor shard = backend.empty(shape, full.dtype(), category);
  Tensor full2d = full.reshaped({rows, cols});
  Tensor shard2d = shard.reshaped({b.rows, b.cols});
  backend.copy_block(full2d, b.row0(), b.col0(), shard2d, 0, 0, b.rows, b.cols);
  return shard;
}

Tensor gather_full(const Tensor& shard, const Layout& layout, const Mesh& mesh, const Backend& backend,
                   std::int64_t full_row_count, std::int64_t full_col_count) {
  Communicator& tp = mesh.comm(group::tp);
  const bool vector = shard.ndim() == 1;
  const std::int64_t srows = vector ? 1 : shard.rows(), scols = shard.cols();
  Tensor gathered = backend.empty({srows * tp.size(), scols}, shard.dtype(), MemCategory::communication);
  tp.all_gather(shard.reshaped({srows, scols}), gathered);
  Shape shape = vector ? Shape{full_col_count} : Shape{full_row_count, full_col_count};
  // An assembled copy for checks, dumps and checkpoints, not the model's data: `other`, so that it
  // never counts among the activations a step is held to (docs/memory.md).
  Tensor full = backend.empty(shape, shard.dtype(), MemCategory::other);
  Tensor full2d = full.reshaped({vector ? 1 : full_row_count, full_col_count});
  // The tp group's members in group-rank order, as mesh ranks (the mesh may live on a
  // sub-communicator of MPI_COMM_WORLD, whose numbering world_ranks() would give).
  const std::vector<int> members = mesh.topology().group_of(group::tp, mesh.rank());
  for (std::size_t m = 0; m < members.size(); ++m) {
    AxisPosition r = position_over(layout.row_groups, mesh, members[m]);
    AxisPosition c = position_over(layout.col_groups, mesh, members[m]);
    backend.copy_block(gathered, static_cast<std::int64_t>(m) * srows, 0, full2d, r.index * srows,
                       c.index * scols, srows, scols);
  }
  return full;
}

std::string spanning_group(std::vector<std::string> groups) {
  std::sort(groups.begin(), groups.end());
  groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
  if (groups.empty()) return "";
  if (groups.size() == 1) return groups.front();
  static const std::map<std::vector<std::string>, std::string> planes = {
      {{"tp.col", "tp.dep"}, "tp.col-dep"},
      {{"tp.dep", "tp.row"}, "tp.row-dep"},
      {{"tp.input", "tp.weight"}, "tp.input-weight"},
      {{"tp.output", "tp.weight"}, "tp.output-weight"},
      {{"tp.col", "tp.row"}, "tp"},
      {{"tp.col", "tp.dep", "tp.row"}, "tp"},
      {{"tp.input", "tp.output", "tp.weight"}, "tp"},
  };
  auto it = planes.find(groups);
  require(it != planes.end(), "no mesh group spans ", groups.front(), " and ", groups.back());
  return it->second;
}

}  // namespace mdtp
