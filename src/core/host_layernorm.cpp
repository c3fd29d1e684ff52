#include "core/host_layernorm.hpp"

#include "core/eigen_core.hpp"

namespace mdtp {
namespace {

template <class T>
using Row = Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>>;
template <class T>
using ConstRow = Eigen::Map<const Eigen::Array<T, 1, Eigen::Dynamic>>;
using RowD = Eigen::Array<double, 1, Eigen::Dynamic>;

}  // namespace

template <class T>
void row_mean_m2(const T* x, std::int64_t rows, std::int64_t cols, double* stats) {
  for (std::int64_t i = 0; i < rows; ++i) {
    const auto r = ConstRow<T>(x + i * cols, cols).template cast<double>();
    const double mean = cols ? r.sum() / static_cast<double>(cols) : 0.0;
    stats[2 * i] = mean;
    stats[2 * i + 1] = (r - mean).square().sum();
  }
}

template <class T>
void layernorm_apply(const T* x, const double* mean_rstd, const T* gamma, const T* beta, std::int64_t rows,
                     std::int64_t cols, T* xhat, T* y) {
  const ConstRow<T> g(gamma, cols), b(beta, cols);
  for (std::int64_t i = 0; i < rows; ++i) {
    Row<T> h(xhat + i * cols, cols);
    h = ((ConstRow<T>(x + i * cols, cols).template cast<double>() - mean_rstd[2 * i]) * mean_rstd[2 * i + 1])
            .template cast<T>();
    Row<T>(y + i * cols, cols) = h * g + b;
  }
}

template <class T>
void layernorm_backward_sums(const T* dy, const T* xhat, const T* gamma, std::int64_t rows, std::int64_t cols,
                             double* sums) {
  const RowD g = ConstRow<T>(gamma, cols).template cast<double>();
  RowD v(cols);
  for (std::int64_t i = 0; i < rows; ++i) {
    v = ConstRow<T>(dy + i * cols, cols).template cast<double>() * g;
    sums[2 * i] = v.sum();
    sums[2 * i + 1] = (v * ConstRow<T>(xhat + i * cols, cols).template cast<double>()).sum();
  }
}

template <class T>
void layernorm_backward(const T* dy, const T* xhat, const T* gamma, const double* mean_rstd, const double* sums,
                        std::int64_t n, std::int64_t rows, std::int64_t cols, T* dx, T* dgamma, T* dbeta) {
  const RowD g = ConstRow<T>(gamma, cols).template cast<double>();
  Row<T> dg(dgamma, cols), db(dbeta, cols);
  const double inv_n = 1.0 / static_cast<double>(n);
  for (std::int64_t i = 0; i < rows; ++i) {
    const double rstd = mean_rstd[2 * i + 1], s1 = sums[2 * i] * inv_n, s2 = sums[2 * i + 1] * inv_n;
    const ConstRow<T> d(dy + i * cols, cols), h(xhat + i * cols, cols);
    Row<T>(dx + i * cols, cols) =
        (rstd * (d.template cast<double>() * g - s1 - h.template cast<double>() * s2)).template cast<T>();
    dg += d * h;
    db += d;
  }
}

#define MDTP_INSTANTIATE(T)                                                                                        \
  template void row_mean_m2<T>(const T*, std::int64_t, std::int64_t, double*);                                     \
  template void layernorm_apply<T>(const T*, const double*, const T*, const T*, std::int64_t, std::int64_t, T*,   \
                                   T*);                                                                            \
  template void layernorm_backward_sums<T>(const T*, const T*, const T*, std::int64_t, std::int64_t, double*);     \
  template void layernorm_backward<T>(const T*, const T*, const T*, const double*, const double*, std::int64_t,    \
                                      std::int64_t, std::int64_t, T*, T*, T*);
MDTP_INSTANTIATE(float)
MDTP_INSTANTIATE(double)
#undef MDTP_INSTANTIATE

}  // namespace mdtp
