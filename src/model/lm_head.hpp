#pragma once
// TiedLmHead: logits = X·wteᵀ with the embedding's own (vocabulary-parallel) weight, and the
// softmax cross-entropy over the split vocabulary, in any mode (model_split.hpp):
//
//   forward   G = all-gather X over R's span (rows)                          [B·T, H/|C|]
//             P = G·wte_sliceᵀ, partial over C (the hidden split)             [B·T, V/|S|]
//             logits = reduce-scatter P over C (rows)                         [B·T/|C|, V/|S|]
//             per row: all-reduce MAX over S, then one all-reduce SUM over S of (Σ exp, target
//             logit); padded vocabulary columns count as -inf
//   backward  dlogits = scale·(softmax − onehot); all-gather over C → dP;
//             wte.grad += dPᵀ·G; dG = dP·wte_slice, reduce-scatter over R's span (all-reduce
//             over S when R is empty) → dX in L.
#include <cstdint>
#include <span>
#include <vector>

#include "model/gpt_kernels.hpp"
#include "model/model_split.hpp"

namespace mdtp {

class TiedLmHead {
 public:
  TiedLmHead(const TensorParallelMode& mode, const GptKernels& kernels, const ModelSplit& split, Parameter& wte,
             std::int64_t vocab_size);
  // x: the final hidden states in L; targets: this replica's B·T targets.  Returns the SUM of the
  // token losses over the logit rows this rank holds (every rank of the vocabulary split returns
  // the same sum; the caller reduces over C and data parallelism).
  double forward(const Tensor& x, std::span<const std::int32_t> targets);
  // Backward of `scale` × the summed loss (scale = 1 / tokens for a mean); returns dX in L.
  Tensor backward(double scale);

 private:
  TpContext ctx_;
  const GptKernels& kernels_;
  ModelSplit split_;
  Parameter& wte_;
  std::int64_t vocab_size_;
  std::int64_t vocab_col0_ = 0, valid_cols_ = 0;
  Tensor gathered_, logits_, lse_;
  std::vector<std::int32_t> targets_;  // of this rank's logit rows
};

}  // namespace mdtp
