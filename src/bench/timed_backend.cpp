#include "bench/timed_backend.hpp"

namespace mdtp::bench {

namespace {
constexpr double KernelSeconds::*kGemm = &KernelSeconds::gemm;
constexpr double KernelSeconds::*kOther = &KernelSeconds::other;
}  // namespace

void TimedBackend::fill(Tensor& t, double value) const {
  timed(kOther, [&] { inner_.fill(t, value); });
}
void TimedBackend::copy(const Tensor& src, Tensor& dst) const {
  timed(kOther, [&] { inner_.copy(src, dst); });
}
void TimedBackend::copy_block(const Tensor& src, std::int64_t sr0, std::int64_t sc0, Tensor& dst, std::int64_t dr0,
                              std::int64_t dc0, std::int64_t rows, std::int64_t cols) const {
  timed(kOther, [&] { inner_.copy_block(src, sr0, sc0, dst, dr0, dc0, rows, cols); });
}
void TimedBackend::gemm(bool transpose_a, bool transpose_b, double alpha, const Tensor& a, const Tensor& b,
                        double beta, Tensor& c) const {
  timed(kGemm, [&] { inner_.gemm(transpose_a, transpose_b, alpha, a, b, beta, c); });
}
void TimedBackend::axpy(double alpha, const Tensor& x, Tensor& y) const {
  timed(kOther, [&] { inner_.axpy(alpha, x, y); });
}
void TimedBackend::scale(Tensor& x, double alpha) const {
  timed(kOther, [&] { inner_.scale(x, alpha); });
}
void TimedBackend::add_row_vector(Tensor& y, const Tensor& row) const {
  timed(kOther, [&] { inner_.add_row_vector(y, row); });
}
void TimedBackend::column_sums(const Tensor& x, Tensor& out, double beta) const {
  timed(kOther, [&] { inner_.column_sums(x, out, beta); });
}
double TimedBackend::sum_squares(const Tensor& x) const {
  return timed(kOther, [&] { return inner_.sum_squares(x); });
}
void TimedBackend::gelu_forward(const Tensor& x, Tensor& y) const {
  timed(kOther, [&] { inner_.gelu_forward(x, y); });
}
void TimedBackend::gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) const {
  timed(kOther, [&] { inner_.gelu_backward(x, dy, dx); });
}
void TimedBackend::row_mean_m2(const Tensor& x, Tensor& stats) const {
  timed(kOther, [&] { inner_.row_mean_m2(x, stats); });
}
void TimedBackend::merge_row_stats(const Tensor& stacked, int parts, std::int64_t count_per_part, double eps,
                                   Tensor& mean_rstd) const {
  timed(kOther, [&] { inner_.merge_row_stats(stacked, parts, count_per_part, eps, mean_rstd); });
}
void TimedBackend::layernorm_apply(const Tensor& x, const Tensor& mean_rstd, const Tensor& gamma,
                                   const Tensor& beta, Tensor& xhat, Tensor& y) const {
  timed(kOther, [&] { inner_.layernorm_apply(x, mean_rstd, gamma, beta, xhat, y); });
}
void TimedBackend::layernorm_backward_sums(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
                                           Tensor& sums) const {
  timed(kOther, [&] { inner_.layernorm_backward_sums(dy, xhat, gamma, sums); });
}
void TimedBackend::layernorm_backward(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
                                      const Tensor& mean_rstd, const Tensor& sums, std::int64_t n, Tensor& dx,
                                      Tensor& dgamma, Tensor& dbeta) const {
  timed(kOther, [&] { inner_.layernorm_backward(dy, xhat, gamma, mean_rstd, sums, n, dx, dgamma, dbeta); });
}
void TimedBackend::embedding_forward(const Tensor& table, std::span<const std::int32_t> ids, std::int64_t first_row,
                                     Tensor& out) const {
  timed(kOther, [&] { inner_.embedding_forward(table, ids, first_row, out); });
}
void TimedBackend::embedding_backward(const Tensor& dy, std::span<const std::int32_t> ids, std::int64_t first_row,
                                      Tensor& table_grad) const {
  timed(kOther, [&] { inner_.embedding_backward(dy, ids, first_row, table_grad); });
}
void TimedBackend::attention_forward(const Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, Tensor& y,
                                     Tensor& probs) const {
  timed(kOther, [&] { inner_.attention_forward(qkv, seq_len, n_head, y, probs); });
}
void TimedBackend::attention_backward(const Tensor& dy, const Tensor& qkv, const Tensor& probs, std::int64_t seq_len,
                                      std::int64_t n_head, Tensor& dqkv) const {
  timed(kOther, [&] { inner_.attention_backward(dy, qkv, probs, seq_len, n_head, dqkv); });
}
void TimedBackend::xent_row_max(const Tensor& logits, std::int64_t valid_cols, Tensor& row_max) const {
  timed(kOther, [&] { inner_.xent_row_max(logits, valid_cols, row_max); });
}
void TimedBackend::xent_partial_sums(const Tensor& logits, std::int64_t valid_cols, const Tensor& row_max,
                                     std::span<const std::int32_t> targets, std::int64_t col0, Tensor& sums) const {
  timed(kOther, [&] { inner_.xent_partial_sums(logits, valid_cols, row_max, targets, col0, sums); });
}
void TimedBackend::xent_backward(const Tensor& logits, std::int64_t valid_cols, const Tensor& lse,
                                 std::span<const std::int32_t> targets, std::int64_t col0, double scale,
                                 Tensor& dlogits) const {
  timed(kOther, [&] { inner_.xent_backward(logits, valid_cols, lse, targets, col0, scale, dlogits); });
}
void TimedBackend::adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                                const AdamWStep& step) const {
  timed(kOther, [&] { inner_.adamw_update(param, grad, m, v, step); });
}

}  // namespace mdtp::bench
