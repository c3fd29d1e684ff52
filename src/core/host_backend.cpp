// Host backend: Eigen for GEMM, plain loops for the rest (they are memory-bound).  Each op
// dispatches once on the element type; the Backend front has validated the arguments and refused
// dtypes other than f32 and f64 (bf16/f16 are CUDA storage types).
#include <Eigen/Core>
#include <cmath>
#include <cstring>

#include "core/backend.hpp"

namespace mdtp {
namespace {

template <class T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using MatrixMap = Eigen::Map<RowMatrix<T>>;

template <class T>
MatrixMap<T> as_matrix(const Tensor& t) {
  return MatrixMap<T>(t.data<T>(), t.rows(), t.cols());
}

template <class Fn>
decltype(auto) dispatch(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32: return fn(float{});
    case DType::f64: return fn(double{});
    default: throw_error("the host backend computes in f32 or f64; got ", dtype_name(dtype));
  }
}

// PyTorch AdamW, element-wise: decoupled decay, bias-corrected moments.
template <class T>
void adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& st) {
  T* w = param.data<T>();
  const T* g = grad.data<T>();
  T* m1 = m.data<T>();
  T* m2 = v.data<T>();
  const double t = static_cast<double>(st.step);
  const double c1 = 1.0 - std::pow(st.beta1, t), c2 = 1.0 - std::pow(st.beta2, t);
  const T decay = static_cast<T>(1.0 - st.lr * st.weight_decay);
  const T b1 = static_cast<T>(st.beta1), b2 = static_cast<T>(st.beta2);
  const T step_size = static_cast<T>(st.lr / c1), inv_sqrt_c2 = static_cast<T>(1.0 / std::sqrt(c2));
  const T eps = static_cast<T>(st.eps), gs = static_cast<T>(st.grad_scale);
  for (std::int64_t i = 0; i < param.numel(); ++i) {
    const T gi = g[i] * gs;
    m1[i] = b1 * m1[i] + (T(1) - b1) * gi;
    m2[i] = b2 * m2[i] + (T(1) - b2) * gi * gi;
    w[i] = w[i] * decay - step_size * m1[i] / (std::sqrt(m2[i]) * inv_sqrt_c2 + eps);
  }
}

constexpr double kGeluC = 0.7978845608028654;  // sqrt(2/pi)

class HostBackend final : public Backend {
 public:
  HostBackend() : Backend(std::make_shared<HostAllocator>()) {}
  DeviceKind device() const override { return DeviceKind::host; }
  const char* name() const override { return "host-eigen"; }
  bool computes_in(DType dtype) const override { return dtype == DType::f32 || dtype == DType::f64; }

 protected:
  std::vector<double> do_to_f64(const Tensor& t) const override {
    std::vector<double> out(static_cast<std::size_t>(t.numel()));
    dispatch(t.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* p = t.data<T>();
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(p[i]);
    });
    return out;
  }

  void do_assign_f64(Tensor& t, const std::vector<double>& values) const override {
    dispatch(t.dtype(), [&](auto zero) {
      using T = decltype(zero);
      T* p = t.data<T>();
      for (std::size_t i = 0; i < values.size(); ++i) p[i] = static_cast<T>(values[i]);
    });
  }

  void do_fill(Tensor& t, double value) const override {
    dispatch(t.dtype(), [&](auto zero) {
      using T = decltype(zero);
      std::fill_n(t.data<T>(), t.numel(), static_cast<T>(value));
    });
  }

  void do_copy(const Tensor& src, Tensor& dst) const override {
    if (src.raw_data() != dst.raw_data()) std::memmove(dst.raw_data(), src.raw_data(), src.bytes());
  }

  void do_copy_block(const Tensor& src, std::int64_t sr0, std::int64_t sc0, Tensor& dst,
                  std::int64_t dr0, std::int64_t dc0, std::int64_t rows,
                  std::int64_t cols) const override {
    std::size_t es = dtype_size(src.dtype());
    const char* s = static_cast<const char*>(src.raw_data());
    char* d = static_cast<char*>(dst.raw_data());
    for (std::int64_t i = 0; i < rows; ++i)
      std::memcpy(d + ((dr0 + i) * dst.cols() + dc0) * es, s + ((sr0 + i) * src.cols() + sc0) * es,
                  static_cast<std::size_t>(cols) * es);
  }

  void do_gemm(bool ta, bool tb, double alpha, const Tensor& a, const Tensor& b, double beta,
            Tensor& c) const override {
    std::int64_t m = ta ? a.cols() : a.rows(), k = ta ? a.rows() : a.cols();
    std::int64_t n = tb ? b.rows() : b.cols();
    dispatch(a.dtype(), [&](auto zero) {
      using T = decltype(zero);
      auto A = as_matrix<T>(a);
      auto B = as_matrix<T>(b);
      auto C = as_matrix<T>(c);
      T al = static_cast<T>(alpha), be = static_cast<T>(beta);
      if (beta == 0.0) C.setZero();
      else if (beta != 1.0) C *= be;
      if (m == 0 || n == 0 || k == 0) return;
      if (!ta && !tb) C.noalias() += al * A * B;
      else if (ta && !tb) C.noalias() += al * A.transpose() * B;
      else if (!ta && tb) C.noalias() += al * A * B.transpose();
      else C.noalias() += al * A.transpose() * B.transpose();
    });
  }

  void do_axpy(double alpha, const Tensor& x, Tensor& y) const override {
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      T* yp = y.data<T>();
      T a = static_cast<T>(alpha);
      for (std::int64_t i = 0; i < x.numel(); ++i) yp[i] += a * xp[i];
    });
  }

  void do_scale(Tensor& x, double alpha) const override {
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      T* p = x.data<T>();
      for (std::int64_t i = 0; i < x.numel(); ++i) p[i] *= static_cast<T>(alpha);
    });
  }

  void do_add_row_vector(Tensor& y, const Tensor& row) const override {
    dispatch(y.dtype(), [&](auto zero) {
      using T = decltype(zero);
      as_matrix<T>(y).rowwise() += Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>(row.data<T>(), row.numel());
    });
  }

  void do_column_sums(const Tensor& x, Tensor& out, double beta) const override {
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      auto O = Eigen::Map<Eigen::Matrix<T, 1, Eigen::Dynamic>>(out.data<T>(), out.numel());
      if (beta == 0.0) O.setZero();
      else if (beta != 1.0) O *= static_cast<T>(beta);
      O += as_matrix<T>(x).colwise().sum();
    });
  }

  double do_sum_squares(const Tensor& x) const override {
    return dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* p = x.data<T>();
      double s = 0.0;
      for (std::int64_t i = 0; i < x.numel(); ++i) s += static_cast<double>(p[i]) * p[i];
      return s;
    });
  }

  void do_gelu_forward(const Tensor& x, Tensor& y) const override {
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      T* yp = y.data<T>();
      for (std::int64_t i = 0; i < x.numel(); ++i) {
        T v = xp[i];
        yp[i] = T(0.5) * v * (T(1) + std::tanh(T(kGeluC) * (v + T(0.044715) * v * v * v)));
      }
    });
  }

  void do_gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) const override {
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      const T* gp = dy.data<T>();
      T* dp = dx.data<T>();
      for (std::int64_t i = 0; i < x.numel(); ++i) {
        T v = xp[i];
        T u = T(kGeluC) * (v + T(0.044715) * v * v * v);
        T th = std::tanh(u);
        T du = T(kGeluC) * (T(1) + T(3 * 0.044715) * v * v);
        dp[i] = gp[i] * (T(0.5) * (T(1) + th) + T(0.5) * v * (T(1) - th * th) * du);
      }
    });
  }

  void do_row_mean_m2(const Tensor& x, Tensor& stats) const override {
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      double* s = stats.data<double>();
      std::int64_t n = x.cols();
      for (std::int64_t i = 0; i < x.rows(); ++i) {
        double mean = 0.0;
        for (std::int64_t j = 0; j < n; ++j) mean += xp[i * n + j];
        mean = n ? mean / static_cast<double>(n) : 0.0;
        double m2 = 0.0;
        for (std::int64_t j = 0; j < n; ++j) {
          double d = xp[i * n + j] - mean;
          m2 += d * d;
        }
        s[2 * i] = mean;
        s[2 * i + 1] = m2;
      }
    });
  }

  void do_merge_row_stats(const Tensor& stacked, int parts, std::int64_t count_per_part, double eps,
                       Tensor& mean_rstd) const override {
    std::int64_t rows = mean_rstd.rows();
    const double* s = stacked.data<double>();
    double* out = mean_rstd.data<double>();
    for (std::int64_t i = 0; i < rows; ++i) {
      // Chan et al.: merge (n_a, mean_a, M2_a) with (n_b, mean_b, M2_b).
      double n = 0.0, mean = 0.0, m2 = 0.0;
      for (int p = 0; p < parts; ++p) {
        double nb = static_cast<double>(count_per_part);
        double mb = s[2 * (p * rows + i)], m2b = s[2 * (p * rows + i) + 1];
        double total = n + nb;
        double delta = mb - mean;
        mean += delta * nb / total;
        m2 += m2b + delta * delta * n * nb / total;
        n = total;
      }
      out[2 * i] = mean;
      out[2 * i + 1] = 1.0 / std::sqrt(m2 / n + eps);
    }
  }

  void do_layernorm_apply(const Tensor& x, const Tensor& mean_rstd, const Tensor& gamma,
                       const Tensor& beta, Tensor& xhat, Tensor& y) const override {
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      const T* g = gamma.data<T>();
      const T* b = beta.data<T>();
      const double* mr = mean_rstd.data<double>();
      T* hp = xhat.data<T>();
      T* yp = y.data<T>();
      std::int64_t n = x.cols();
      for (std::int64_t i = 0; i < x.rows(); ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          T h = static_cast<T>((xp[i * n + j] - mr[2 * i]) * mr[2 * i + 1]);
          hp[i * n + j] = h;
          yp[i * n + j] = h * g[j] + b[j];
        }
    });
  }

  void do_layernorm_backward_sums(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
                               Tensor& sums) const override {
    dispatch(dy.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* gp = dy.data<T>();
      const T* hp = xhat.data<T>();
      const T* g = gamma.data<T>();
      double* s = sums.data<double>();
      std::int64_t n = dy.cols();
      for (std::int64_t i = 0; i < dy.rows(); ++i) {
        double s1 = 0.0, s2 = 0.0;
        for (std::int64_t j = 0; j < n; ++j) {
          double v = static_cast<double>(gp[i * n + j]) * g[j];
          s1 += v;
          s2 += v * hp[i * n + j];
        }
        s[2 * i] = s1;
        s[2 * i + 1] = s2;
      }
    });
  }

  void do_layernorm_backward(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
                          const Tensor& mean_rstd, const Tensor& sums, std::int64_t n_total,
                          Tensor& dx, Tensor& dgamma, Tensor& dbeta) const override {
    dispatch(dy.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* gp = dy.data<T>();
      const T* hp = xhat.data<T>();
      const T* g = gamma.data<T>();
      const double* mr = mean_rstd.data<double>();
      const double* s = sums.data<double>();
      T* dxp = dx.data<T>();
      T* dg = dgamma.data<T>();
      T* db = dbeta.data<T>();
      std::int64_t n = dy.cols();
      double inv_n = 1.0 / static_cast<double>(n_total);
      for (std::int64_t i = 0; i < dy.rows(); ++i) {
        double rstd = mr[2 * i + 1], s1 = s[2 * i] * inv_n, s2 = s[2 * i + 1] * inv_n;
        for (std::int64_t j = 0; j < n; ++j) {
          double h = hp[i * n + j];
          double v = static_cast<double>(gp[i * n + j]) * g[j];
          dxp[i * n + j] = static_cast<T>(rstd * (v - s1 - h * s2));
          dg[j] += gp[i * n + j] * hp[i * n + j];
          db[j] += gp[i * n + j];
        }
      }
    });
  }

  void do_adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& step) const override {
    dispatch(param.dtype(), [&](auto zero) { adamw<decltype(zero)>(param, grad, m, v, step); });
  }
};

}  // namespace

std::unique_ptr<Backend> make_host_backend() { return std::make_unique<HostBackend>(); }

}  // namespace mdtp
