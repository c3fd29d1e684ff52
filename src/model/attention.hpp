#pragma once
// Causal self-attention written against the mode interface, for both block families:
//   qkv = c_attn(x)            mode.linear(H → (heads + 2·kv)·d) from the residual layout; its
//                              output layout splits columns over at most one group of size g
//   llama: Q, K = rope(Q, K)   rotary positions on this rank's heads (no communication)
//   y   = softmax(q·kᵀ/√d + causal mask)·v   per whole sequence and per local head (no comm.);
//                              query head h reads K/V head h / (heads/kv) (grouped-query attention)
//   out = c_proj(y)            mode.linear(H → H) from c_attn's output layout, back to the
//                              residual layout (1D: row-parallel; 3D: parity flips back)
// So that every rank holds whole heads of Q with their K and V, c_attn's fused weight stores its
// columns BLOCK-GROUPED (model/fused_columns.hpp): column block b (of g) is [Q heads of b | K heads
// of b | V heads of b].  Requires heads divisible by g, and the rows a rank holds to be whole
// sequences.  Grouped-query attention with kv key/value heads:
//  - kv % g = 0: block b holds kv/g K and V heads of its own;
//  - g % kv = 0: each K/V head is needed by the g/kv consecutive ranks whose query heads read it.
//    Each of them stores it (c_attn is (heads + 2g)·d wide in storage, (heads + 2kv)·d in the
//    checkpoint), so forward and backward run exactly as with g heads of K and V.  The copies start
//    equal (drawn by the logical column) and stay equal: their gradients are partial sums, added
//    over the tp.kv group (Parameter::replicated_columns) before the data-parallel sum, and the
//    global norm counts them once.  The input gradient needs nothing: the mode's reduction of dX
//    over the g ranks already adds every copy's contribution once.
//  - anything else is refused in one line.
//
// Names: GPT-2's c_attn / c_proj (with biases), Llama's fused qkv_proj / o_proj (no biases; the
// checkpoint splits qkv_proj into Hugging Face's q_proj, k_proj, v_proj).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/gpt_config.hpp"
#include "model/gpt_kernels.hpp"
#include "model/model_param.hpp"
#include "tp/mode.hpp"

namespace mdtp {

// The rule above for a model and the g ranks that split its heads (the fastest TP axis of the
// mode's grid); `where` starts the one-line error.  Called by the trainer's set-up on every rank
// before any collective, and by the attention layer itself.
void require_heads_split(const ModelShape& model, int g, const std::string& where, const char* mode_name);

// What attention keeps for one micro-batch: its two Linears', Q·K·V (after the rotary embedding)
// and the softmax probabilities (the latter unless selective recomputation drops them:
// backward_input then recomputes them).
struct AttentionSaved {
  LinearSaved c_attn, c_proj;
  Tensor qkv, probs;
};

class CausalSelfAttention {
 public:
  // `name` is the module prefix ("transformer.h.0.attn", "model.layers.0.self_attn");
  // `batch_per_replica` sequences of config.seq tokens are fed to every forward.
  CausalSelfAttention(const TensorParallelMode& mode, const GptKernels& kernels, const std::string& name,
                      const ModelShape& config, const Layout& input, std::int64_t batch_per_replica);
  // keep_probabilities false: selective recomputation (Korthikanti et al. 2022) — the T×T
  // probabilities are freed here and recomputed from the kept Q, K, V by backward_input.
  Tensor forward(const Tensor& x, AttentionSaved& saved, bool keep_probabilities = true);
  // B: c_proj's, the attention core's (and the rotary embedding's) and c_attn's input gradients;
  // W: c_proj's then c_attn's.  Without kept probabilities the core's forward (QKᵀ, mask, softmax)
  // runs again first, with the same kernel on the same Q, K, V, so the probabilities are bitwise
  // the forward's.
  Tensor backward_input(const Tensor& dy, AttentionSaved& saved);
  void backward_weight(AttentionSaved& saved);
  std::vector<ModelParam> parameters();
  Linear& c_attn() { return *c_attn_; }
  Linear& c_proj() { return *c_proj_; }
  std::int64_t local_heads() const { return local_heads_; }
  std::int64_t local_kv_heads() const { return local_kv_heads_; }

 private:
  // The core's forward into y and saved.probs.
  Tensor core_forward(AttentionSaved& saved);

  const Backend& backend_;
  const GptKernels& kernels_;
  ModelShape config_;
  std::unique_ptr<Linear> c_attn_, c_proj_;
  std::int64_t local_heads_ = 0, local_kv_heads_ = 0;
  std::vector<std::int64_t> qkv_columns_;
  std::int64_t logical_qkv_width_ = 0;  // (heads + 2·kv)·d: the checkpoint's columns
};

}  // namespace mdtp
