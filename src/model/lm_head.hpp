#pragma once
// TiedLmHead: logits = X·wteᵀ with the embedding's own (vocabulary-parallel) weight, and the
// softmax cross-entropy over the split vocabulary, in any mode (model_split.hpp):
//
//   forward   G = all-gather X over R's span (rows)                          [B·T, H/|C|]
//             P = G·wte_sliceᵀ, partial over C (the hidden split)             [B·T, V/|S|]
//             logits = reduce-scatter P over C (rows)                         [B·T/|C|, V/|S|]
//             per row: all-reduce MAX over S, then one all-reduce SUM over S of (Σ exp, target
//             logit); padded vocabulary columns count as -inf
//   backward  B: dlogits = scale·(softmax − onehot); all-gather over C → dP;
//                dG = dP·wte_slice, reduce-scatter over R's span (all-reduce over S when R is
//                empty) → dX in L
//             W: wte.grad += dPᵀ·G (dP and G kept from B and forward)
#include <cstdint>
#include <span>
#include <vector>

#include "model/gpt_kernels.hpp"
#include "model/model_split.hpp"

namespace mdtp {

// What the head keeps for one micro-batch.
struct LmHeadSaved {
  Tensor gathered;  // G, the all-gathered final hidden states (forward → W)
  Tensor logits;    // this rank's logit rows (forward → B)
  Tensor lse;       // per-row log-sum-exp, f64 (forward → B)
  Tensor dp;        // dP (B → W)
  std::vector<std::int32_t> targets;  // of this rank's logit rows
};

class TiedLmHead {
 public:
  TiedLmHead(const TensorParallelMode& mode, const GptKernels& kernels, const ModelSplit& split, Parameter& wte,
             std::int64_t vocab_size);
  // x: the final hidden states in L; targets: this replica's B·T targets.  Returns the SUM of the
  // token losses over the logit rows this rank holds (every rank of the vocabulary split returns
  // the same sum; the caller reduces over C and data parallelism).
  double forward(const Tensor& x, std::span<const std::int32_t> targets, LmHeadSaved& saved);
  // B of `scale` × the summed loss (scale = 1 / tokens for a mean); returns dX in L.
  Tensor backward_input(double scale, LmHeadSaved& saved);
  // W: the tied embedding's gradient from this head; empties `saved`.
  void backward_weight(LmHeadSaved& saved);

 private:
  TpContext ctx_;
  const GptKernels& kernels_;
  ModelSplit split_;
  Parameter& wte_;
  std::int64_t vocab_size_;
  std::int64_t vocab_col0_ = 0, valid_cols_ = 0;
};

}  // namespace mdtp
