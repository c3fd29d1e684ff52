#include "model/model_split.hpp"

#include <algorithm>

#include "mesh/mesh.hpp"

namespace mdtp {

int group_size(const Mesh& mesh, const std::string& group) { return group.empty() ? 1 : mesh.comm(group).size(); }

std::string group_list(const std::vector<std::string>& groups) {
  std::string s;
  for (const auto& g : groups) s += (s.empty() ? "" : "×") + g;
  return s.empty() ? "nothing" : s;
}

ModelSplit ModelSplit::of(const TensorParallelMode& mode) {
  const Mesh& mesh = mode.context().mesh;
  ModelSplit s;
  s.residual = mode.residual_layout();
  s.rows = s.residual.row_groups;
  s.cols = s.residual.col_groups;
  require(s.cols.size() <= 1, "GPT model: mode ", mode.name(), " splits the residual hidden dimension over ",
          group_list(s.cols), "; the model supports at most one group");
  std::vector<std::string> rest;
  for (const auto& axis : mode.tp_axes())
    if (std::find(s.cols.begin(), s.cols.end(), axis) == s.cols.end()) rest.push_back(axis);
  if (s.rows.empty()) {
    s.vocab = rest;
  } else {
    std::vector<std::string> a = rest, b = s.rows;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    require(a == b, "GPT model: mode ", mode.name(), " splits residual rows over ", group_list(s.rows),
            " but its TP axes outside the hidden split are ", group_list(rest),
            "; the vocabulary-parallel embedding needs the two to be the same groups");
    s.vocab = s.rows;
  }
  s.row_span = spanning_group(s.rows);
  s.col_group = s.cols.empty() ? "" : s.cols.front();
  s.vocab_span = spanning_group(s.vocab);
  s.row_parts = group_size(mesh, s.row_span);
  s.col_parts = group_size(mesh, s.col_group);
  s.vocab_parts = group_size(mesh, s.vocab_span);
  // The embedding's reduce-scatter over row_span hands this rank the row block of its position in
  // that group; the residual layout must expect exactly that block (see the header).
  if (!s.row_span.empty()) {
    const ShardBlock b = shard_block(s.residual, mesh, s.row_parts, s.col_parts, "GPT residual rows");
    require(b.row_index == mesh.comm(s.row_span).rank(), "GPT model: in mode ", mode.name(), " this rank holds row block ",
            b.row_index, " of layout ", s.residual.name, " but is rank ", mesh.comm(s.row_span).rank(), " of ",
            s.row_span, "; the row groups and their spanning group disagree on the block order");
  }
  return s;
}

std::int64_t ModelSplit::padded_vocab(std::int64_t vocab_size) const {
  return (vocab_size + vocab_parts - 1) / vocab_parts * vocab_parts;
}

}  // namespace mdtp
