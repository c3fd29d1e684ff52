#include "bench/timed_backend.hpp"

namespace mdtp::bench {

namespace {
constexpr double KernelSeconds::*kGemm = &KernelSeconds::gemm;
constexpr double KernelSeconds::*kOther = &KernelSeconds::other;
}  // namespace

void TimedBackend::do_fill(Tensor& t, double value) const {
  timed(kOther, [&] { inner_.fill(t, value); });
}
void TimedBackend::do_copy(const Tensor& src, Tensor& dst) const {
  timed(kOther, [&] { inner_.copy(src, dst); });
}
void TimedBackend::do_convert(const Tensor& src, Tensor& dst) const {
  timed(kOther, [&] { inner_.convert(src, dst); });
}
void TimedBackend::do_copy_block(const Tensor& src, std::int64_t sr0, std::int64_t sc0, Tensor& dst, std::int64_t dr0,
                              std::int64_t dc0, std::int64_t rows, std::int64_t cols) const {
  timed(kOther, [&] { inner_.copy_block(src, sr0, sc0, dst, dr0, dc0, rows, cols); });
}
void TimedBackend::do_gemm(bool transpose_a, bool transpose_b, double alpha, const Tensor& a, const Tensor& b,
                        double beta, Tensor& c) const {
  timed(kGemm, [&] { inner_.gemm(transpose_a, transpose_b, alpha, a, b, beta, c); });
}
void TimedBackend::do_axpy(double alpha, const Tensor& x, Tensor& y) const {
  timed(kOther, [&] { inner_.axpy(alpha, x, y); });
}
void TimedBackend::do_scale(Tensor& x, double alpha) const {
  timed(kOther, [&] { inner_.scale(x, alpha); });
}
void TimedBackend::do_add_row_vector(Tensor& y, const Tensor& row) const {
  timed(kOther, [&] { inner_.add_row_vector(y, row); });
}
void TimedBackend::do_column_sums(const Tensor& x, Tensor& out, double beta) const {
  timed(kOther, [&] { inner_.column_sums(x, out, beta); });
}
double TimedBackend::do_sum_squares(const Tensor& x) const {
  return timed(kOther, [&] { return inner_.sum_squares(x); });
}
void TimedBackend::do_gelu_forward(const Tensor& x, Tensor& y) const {
  timed(kOther, [&] { inner_.gelu_forward(x, y); });
}
void TimedBackend::do_gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) const {
  timed(kOther, [&] { inner_.gelu_backward(x, dy, dx); });
}
void TimedBackend::do_row_mean_m2(const Tensor& x, Tensor& stats) const {
  timed(kOther, [&] { inner_.row_mean_m2(x, stats); });
}
void TimedBackend::do_merge_row_stats(const Tensor& stacked, int parts, std::int64_t count_per_part, double eps,
                                   Tensor& mean_rstd, bool centred) const {
  timed(kOther, [&] { inner_.merge_row_stats(stacked, parts, count_per_part, eps, mean_rstd, centred); });
}
void TimedBackend::do_layernorm_apply(const Tensor& x, const Tensor& mean_rstd, const Tensor& gamma,
                                   const Tensor& beta, Tensor& xhat, Tensor& y) const {
  timed(kOther, [&] { inner_.layernorm_apply(x, mean_rstd, gamma, beta, xhat, y); });
}
void TimedBackend::do_layernorm_backward_sums(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
                                           Tensor& sums, bool centred) const {
  timed(kOther, [&] { inner_.layernorm_backward_sums(dy, xhat, gamma, sums, centred); });
}
void TimedBackend::do_layernorm_backward(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
                                      const Tensor& mean_rstd, const Tensor& sums, std::int64_t n, Tensor& dx,
                                      Tensor& dgamma, Tensor& dbeta) const {
  timed(kOther, [&] { inner_.layernorm_backward(dy, xhat, gamma, mean_rstd, sums, n, dx, dgamma, dbeta); });
}
void TimedBackend::do_adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                                const AdamWStep& step) const {
  timed(kOther, [&] { inner_.adamw_update(param, grad, m, v, step); });
}

}  // namespace mdtp::bench
