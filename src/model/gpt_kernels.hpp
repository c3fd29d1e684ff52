#pragma once
// GptKernels: the compute the GPT model needs beyond the generic Backend — the vocabulary-parallel
// embedding lookup, causal self-attention over whole sequences, and the vocabulary-parallel
// softmax cross-entropy.  They belong to the model, not to every layer, so they live here; each
// device implements them (host: host_gpt_kernels.cpp; CUDA: src/cuda/cuda_gpt_kernels.*).
//
// The structure is Backend's: public non-virtual methods validate once (through the backend's
// operand checks and the shape rules below), then call the implementation's do_* method.
#include <cstdint>
#include <memory>
#include <span>

#include "core/backend.hpp"

namespace mdtp {

class GptKernels {
 public:
  explicit GptKernels(const Backend& backend) : backend_(backend) {}
  virtual ~GptKernels() = default;
  GptKernels(const GptKernels&) = delete;
  GptKernels& operator=(const GptKernels&) = delete;
  const Backend& backend() const { return backend_; }

  // Token ids are int32 on the host (the data is read there); a device implementation copies
  // them over.  Embedding rows held by this rank are table rows [first_row, first_row +
  // table.rows()) of the full table.  out[i, :] = table[ids[i] - first_row, :] when the id falls
  // in that range, else 0 (the vocabulary-parallel lookup: exactly one rank of the split
  // contributes).
  void embedding_forward(const Tensor& table, std::span<const std::int32_t> ids, std::int64_t first_row,
                         Tensor& out) const;
  // table_grad[ids[i] - first_row, :] += dy[i, :] for the ids in range (repeated ids accumulate,
  // in token order).
  void embedding_backward(const Tensor& dy, std::span<const std::int32_t> ids, std::int64_t first_row,
                          Tensor& table_grad) const;

  // Causal multi-head self-attention over whole sequences.  qkv [N, (n_head + 2·kv)·d]: rows are
  // the tokens of N / seq_len sequences of seq_len tokens; columns [Q heads | K heads | V heads],
  // each head d wide, with kv K/V heads (kv divides n_head; query head h reads K/V head
  // h / (n_head/kv): grouped-query attention; kv = n_head for GPT-2).  y [N, n_head·d] (d and kv
  // follow from y's and qkv's widths); probs [N / seq_len, n_head, seq_len, seq_len] receives the
  // softmax of the scaled (1/sqrt(d)) scores, 0 above the diagonal, kept for backward.
  void attention_forward(const Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, Tensor& y,
                         Tensor& probs) const;
  // dqkv [N, (n_head + 2·kv)·d] from dy [N, n_head·d] (overwritten, not accumulated; a shared K/V
  // head's gradient sums over its query heads).
  void attention_backward(const Tensor& dy, const Tensor& qkv, const Tensor& probs, std::int64_t seq_len,
                          std::int64_t n_head, Tensor& dqkv) const;

  // Rotary position embedding (Hugging Face Llama's rotate-half form), in place on the Q and K
  // columns of qkv [N, (n_head + 2·kv)·d] (V is left alone); row r is position r mod seq_len.  Each
  // head's pair (j, j + d/2), j < d/2, turns by the angle pos·θ^(-2j/d) (computed in f64):
  //   x_j' = x_j·cos − x_{j+d/2}·sin,   x_{j+d/2}' = x_{j+d/2}·cos + x_j·sin.
  // inverse: by the negative angle — the rotation's transpose, which takes the gradient of the
  // rotated Q and K back to the gradient of the unrotated ones.
  void rope(Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, std::int64_t kv_heads, double theta,
            bool inverse) const;
  // SwiGLU (Shazeer 2020; Llama's MLP): gate_up [N, 2c] holds [gate | up] (this rank's c columns of
  // each); y [N, c] = silu(gate) ∘ up with silu(g) = g·σ(g).
  void swiglu_forward(const Tensor& gate_up, Tensor& y) const;
  // dgate_up [N, 2c] = [dy ∘ up ∘ σ(g)(1 + g(1 − σ(g))) | dy ∘ silu(g)] (overwritten).
  void swiglu_backward(const Tensor& gate_up, const Tensor& dy, Tensor& dgate_up) const;

  // Softmax cross-entropy over a vocabulary split by columns.  logits [rows, cols] hold vocabulary
  // entries [col0, col0 + cols) of which only the first `valid_cols` are real (the rest is padding
  // to a multiple of the split and is treated as -inf).  Statistics are f64 whatever the dtype.
  // row_max [rows]: maximum over the valid columns (-inf when there are none).
  void xent_row_max(const Tensor& logits, std::int64_t valid_cols, Tensor& row_max) const;
  // sums [rows, 2]: (Σ_valid exp(logit - max[i]), the logit of targets[i] when it lies in this
  // slice, else 0), so that both are completed by one all-reduce SUM over the split.
  void xent_partial_sums(const Tensor& logits, std::int64_t valid_cols, const Tensor& row_max,
                         std::span<const std::int32_t> targets, std::int64_t col0, Tensor& sums) const;
  // dlogits = scale · (exp(logit - lse[i]) - [col0 + j == targets[i]]) on valid columns, 0 on
  // padding; lse f64 [rows] is the complete log-sum-exp of each row.
  void xent_backward(const Tensor& logits, std::int64_t valid_cols, const Tensor& lse,
                     std::span<const std::int32_t> targets, std::int64_t col0, double scale, Tensor& dlogits) const;

 protected:
  virtual void do_embedding_forward(const Tensor& table, std::span<const std::int32_t> ids, std::int64_t first_row,
                                    Tensor& out) const = 0;
  virtual void do_embedding_backward(const Tensor& dy, std::span<const std::int32_t> ids, std::int64_t first_row,
                                     Tensor& table_grad) const = 0;
  virtual void do_attention_forward(const Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, Tensor& y,
                                    Tensor& probs) const = 0;
  virtual void do_attention_backward(const Tensor& dy, const Tensor& qkv, const Tensor& probs, std::int64_t seq_len,
                                     std::int64_t n_head, Tensor& dqkv) const = 0;
  virtual void do_rope(Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, std::int64_t kv_heads, double theta,
                       bool inverse) const = 0;
  virtual void do_swiglu_forward(const Tensor& gate_up, Tensor& y) const = 0;
  virtual void do_swiglu_backward(const Tensor& gate_up, const Tensor& dy, Tensor& dgate_up) const = 0;
  virtual void do_xent_row_max(const Tensor& logits, std::int64_t valid_cols, Tensor& row_max) const = 0;
  virtual void do_xent_partial_sums(const Tensor& logits, std::int64_t valid_cols, const Tensor& row_max,
                                    std::span<const std::int32_t> targets, std::int64_t col0, Tensor& sums) const = 0;
  virtual void do_xent_backward(const Tensor& logits, std::int64_t valid_cols, const Tensor& lse,
                                std::span<const std::int32_t> targets, std::int64_t col0, double scale,
                                Tensor& dlogits) const = 0;

 private:
  const Backend& backend_;
};

// The host implementation, for a host backend (an mdtp::Error for any other device).
std::unique_ptr<GptKernels> make_host_gpt_kernels(const Backend& backend);

}  // namespace mdtp
