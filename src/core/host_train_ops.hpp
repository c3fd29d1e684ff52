#pragma once
// The host backend's training ops (embedding, causal attention, vocabulary-parallel
// cross-entropy, AdamW), kept out of host_backend.cpp so each file stays one concept.  Plain
// loops: on the host these ops are small next to the GEMMs.  Arguments are validated by the
// caller (HostBackend), which also dispatches on the element type; see Backend for semantics.
#include <cstdint>
#include <span>

#include "core/backend.hpp"

namespace mdtp::host_ops {

template <class T>
void embedding_forward(const Tensor& table, std::span<const std::int32_t> ids, std::int64_t first_row, Tensor& out);
template <class T>
void embedding_backward(const Tensor& dy, std::span<const std::int32_t> ids, std::int64_t first_row,
                        Tensor& table_grad);
template <class T>
void attention_forward(const Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, Tensor& y, Tensor& probs);
template <class T>
void attention_backward(const Tensor& dy, const Tensor& qkv, const Tensor& probs, std::int64_t seq_len,
                        std::int64_t n_head, Tensor& dqkv);
template <class T>
void xent_row_max(const Tensor& logits, std::int64_t valid_cols, Tensor& row_max);
template <class T>
void xent_partial_sums(const Tensor& logits, std::int64_t valid_cols, const Tensor& row_max,
                       std::span<const std::int32_t> targets, std::int64_t col0, Tensor& sums);
template <class T>
void xent_backward(const Tensor& logits, std::int64_t valid_cols, const Tensor& lse,
                   std::span<const std::int32_t> targets, std::int64_t col0, double scale, Tensor& dlogits);
template <class T>
void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& step);

// Shape checks shared by the ops above (throw mdtp::Error naming the tensor and the expectation).
void check_embedding(const Tensor& table, std::size_t ids, const Tensor& rows_tensor, const char* op);
void check_attention(const Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, const Tensor& y,
                     const Tensor& probs, const char* op);
void check_xent(const Tensor& logits, std::int64_t valid_cols, std::size_t targets, const Tensor& stats,
                std::int64_t stats_cols, const char* op);

}  // namespace mdtp::host_ops
