#pragma once
// Causal self-attention written against the mode interface:
//   qkv = c_attn(x)            mode.linear(H → 3H) from the residual layout; its output layout
//                              splits columns over at most one group of size g
//   y   = softmax(q·kᵀ/√d + causal mask)·v   per whole sequence and per local head (no comm.)
//   out = c_proj(y)            mode.linear(H → H) from c_attn's output layout, back to the
//                              residual layout (1D: row-parallel; 3D: parity flips back)
// So that every rank holds whole heads of Q, K and V, c_attn's fused weight stores its columns
// HEAD-GROUPED: column block b (of g) is [Q heads of b | K heads of b | V heads of b]
// (head_grouped_columns gives the logical column of each stored one).  Requires n_head divisible
// by g, and the rows a rank holds to be whole sequences.
#include <cstdint>
#include <memory>
#include <vector>

#include "model/gpt_config.hpp"
#include "model/gpt_kernels.hpp"
#include "model/model_param.hpp"
#include "tp/mode.hpp"

namespace mdtp {

// Storage column → logical column of a fused [.., 3·hidden] QKV tensor split into `blocks`
// column blocks (logical order: all Q, all K, all V).
std::vector<std::int64_t> head_grouped_columns(std::int64_t hidden, std::int64_t blocks);

// What attention keeps for one micro-batch: its two Linears', Q·K·V and the softmax probabilities
// (the latter unless selective recomputation drops them: backward_input then recomputes them).
struct AttentionSaved {
  LinearSaved c_attn, c_proj;
  Tensor qkv, probs;
};

class CausalSelfAttention {
 public:
  // `name` is the module prefix ("transformer.h.0.attn"); `batch_per_replica` sequences of
  // config.seq tokens are fed to every forward.
  CausalSelfAttention(const TensorParallelMode& mode, const GptKernels& kernels, const std::string& name,
                      const ModelShape& config, const Layout& input, std::int64_t batch_per_replica);
  // keep_probabilities false: selective recomputation (Korthikanti et al. 2022) — the T×T
  // probabilities are freed here and recomputed from the kept Q, K, V by backward_input.
  Tensor forward(const Tensor& x, AttentionSaved& saved, bool keep_probabilities = true);
  // B: c_proj's, the attention core's and c_attn's input gradients; W: c_proj's then c_attn's.
  // Without kept probabilities the core's forward (QKᵀ, mask, softmax) runs again first, with
  // the same kernel on the same Q, K, V, so the probabilities are bitwise the forward's.
  Tensor backward_input(const Tensor& dy, AttentionSaved& saved);
  void backward_weight(AttentionSaved& saved);
  std::vector<ModelParam> parameters();
  Linear& c_attn() { return *c_attn_; }
  Linear& c_proj() { return *c_proj_; }
  std::int64_t local_heads() const { return local_heads_; }

 private:
  const Backend& backend_;
  const GptKernels& kernels_;
  ModelShape config_;
  std::unique_ptr<Linear> c_attn_, c_proj_;
  std::int64_t local_heads_ = 0;
  std::vector<std::int64_t> qkv_columns_;
};

}  // namespace mdtp
