#pragma once
// ModelSplit: how the GPT pieces that are not Linears (embeddings, tied LM head, cross-entropy)
// are sharded, derived from the mode's residual layout L alone, so one implementation serves
// every mode.  With L's rows over R and columns over C (at most one group):
//   S = the mode's TP axes not in C: the vocabulary split.  For every mode S equals R as a set
//       (2D: tp.col; 2.5D: tp.dep, tp.col; 3D: tp.weight, tp.input; 1D-SP: tp), or R is empty
//       (1D: S = tp; serial: S empty).  S is ordered like R, so that a reduce-scatter over the
//       group spanning R hands row block b to the rank holding vocabulary slice b: the plane
//       groups list members in ascending TP rank, which is the mixed radix of R (2.5D tp.col-dep:
//       k·q + r; 3D tp.input-weight: j·q + i).
//   wte [V, H]: rows (padded to a multiple of |S|) over S, columns over C.
//   wpe [T, H]: columns over C, replicated over S.
//   logits [B·T, V]: rows over C, vocabulary over S.
#include <string>
#include <vector>

#include "tp/mode.hpp"

namespace mdtp {

struct ModelSplit {
  Layout residual;
  std::vector<std::string> rows, cols, vocab;  // R, C, S
  std::string row_span, col_group, vocab_span;  // mesh groups spanning R, C, S ("" for none)
  int row_parts = 1, col_parts = 1, vocab_parts = 1;

  // Throws a clear error for a mode whose layouts break the assumptions above.
  static ModelSplit of(const TensorParallelMode& mode);
  // Vocabulary padded to a multiple of vocab_parts (padding rows are zero and never win a softmax).
  std::int64_t padded_vocab(std::int64_t vocab_size) const;
};

// Size of a mesh group; 1 for "" (no group).
int group_size(const Mesh& mesh, const std::string& group);
// "tp.col×tp.dep" for messages; "nothing" for an empty list.
std::string group_list(const std::vector<std::string>& groups);

}  // namespace mdtp
