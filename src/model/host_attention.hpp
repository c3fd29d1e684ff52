#pragma once
// Causal multi-head attention on the host by GEMMs (core/host_gemm.hpp), for HostGptKernels.
// Shapes and semantics are GptKernels' (model/gpt_kernels.hpp): qkv [N, C + 2·C_kv] with heads
// d = C/heads wide (C_kv = kv_heads·d: grouped-query attention, query head h reading K/V head
// h / (heads/kv_heads)), probs [N/T, heads, T, T] keeps the masked softmax for backward.
//
// Per (sequence, head), query rows go in blocks of kAttentionBlock: a block of rows [i0, i1) only
// sees keys [0, i1), so the products skip the masked upper triangle beyond the block, and the
// block's scores (at most kAttentionBlock x T) stay in cache between the GEMM that makes them,
// the softmax and the GEMM that uses them.
//   forward:  S = Q_b K_{<i1}ᵀ / sqrt(d) (into probs);  P = softmax_causal(S);  Y_b = P V_{<i1}
//   backward: dV_{<i1} += Pᵀ dY_b;  dP = dY_b V_{<i1}ᵀ;  dS = P ∘ (dP - rowsum(P ∘ dP)) / sqrt(d);
//             dQ_b = dS K_{<i1};  dK_{<i1} += dSᵀ Q_b
// Every step runs in a fixed order with a single-threaded BLAS call, so results are bitwise
// reproducible run to run.
#include <cstdint>

#include "core/backend.hpp"

namespace mdtp {

inline constexpr std::int64_t kAttentionBlock = 64;

template <class T>
void host_attention_forward(const Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, Tensor& y, Tensor& probs);

// `scratch` holds at least min(kAttentionBlock, seq_len) x seq_len elements of T (dP / dS of one block).
template <class T>
void host_attention_backward(const Tensor& dy, const Tensor& qkv, const Tensor& probs, std::int64_t seq_len,
                             std::int64_t n_head, Tensor& dqkv, Tensor& scratch);

}  // namespace mdtp
