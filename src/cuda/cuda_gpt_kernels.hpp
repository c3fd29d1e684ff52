#pragma once
// The GPT kernels (model/gpt_kernels.hpp) on a CudaBackend's stream: embedding lookup and its
// scatter-add, causal attention by strided-batched cuBLAS GEMMs and row-softmax kernels
// (cuda_attention.cpp), and the vocabulary-parallel cross-entropy (cuda_gpt_kernels.cpp).  Token
// ids and targets arrive as host spans and are uploaded per call into pooled device memory,
// accounted as MemCategory::workspace (as is every other scratch buffer) so that the other
// categories match the host's accounting exactly.
#include <memory>

#include "cuda/cuda_backend.hpp"
#include "model/gpt_kernels.hpp"

namespace mdtp {

class CudaGptKernels final : public GptKernels {
 public:
  explicit CudaGptKernels(const CudaBackend& backend) : GptKernels(backend), cuda_(backend) {}

 protected:
  void do_embedding_forward(const Tensor& table, std::span<const std::int32_t> ids, std::int64_t first_row,
                            Tensor& out) const override;
  void do_embedding_backward(const Tensor& dy, std::span<const std::int32_t> ids, std::int64_t first_row,
                             Tensor& table_grad) const override;
  void do_attention_forward(const Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, Tensor& y,
                            Tensor& probs) const override;
  void do_attention_backward(const Tensor& dy, const Tensor& qkv, const Tensor& probs, std::int64_t seq_len,
                             std::int64_t n_head, Tensor& dqkv) const override;
  // The Llama kernels (rotary embedding, SwiGLU) are not written for CUDA yet: they refuse in one
  // line, and mdtp train refuses --model llama with --device cuda before anything is built.
  void do_rope(Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, std::int64_t kv_heads, double theta,
               bool inverse) const override;
  void do_swiglu_forward(const Tensor& gate_up, Tensor& y) const override;
  void do_swiglu_backward(const Tensor& gate_up, const Tensor& dy, Tensor& dgate_up) const override;
  void do_xent_row_max(const Tensor& logits, std::int64_t valid_cols, Tensor& row_max) const override;
  void do_xent_partial_sums(const Tensor& logits, std::int64_t valid_cols, const Tensor& row_max,
                            std::span<const std::int32_t> targets, std::int64_t col0, Tensor& sums) const override;
  void do_xent_backward(const Tensor& logits, std::int64_t valid_cols, const Tensor& lse,
                        std::span<const std::int32_t> targets, std::int64_t col0, double scale,
                        Tensor& dlogits) const override;

 private:
  const CudaBackend& cuda_;
};

std::unique_ptr<GptKernels> make_cuda_gpt_kernels(const CudaBackend& backend);

}  // namespace mdtp
