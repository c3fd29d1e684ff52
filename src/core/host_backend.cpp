// Host backend: Eigen for GEMM, plain loops for the rest (they are memory-bound).  Each op
// dispatches once on the element type; bf16/f16 are refused here (they are CUDA storage types).
#include <Eigen/Core>
#include <cmath>
#include <cstring>

#include "core/backend.hpp"
#include "core/host_train_ops.hpp"

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

void require_host(const Tensor& t, const char* what) {
  require(t.defined(), what, " is undefined");
  require(t.device() == DeviceKind::host, what, " lives on ", device_name(t.device()),
          "; the host backend needs host tensors");
}

void require_same_dtype(const Tensor& a, const Tensor& b, const char* what) {
  require(a.dtype() == b.dtype(), what, ": mixed dtypes ", dtype_name(a.dtype()), " and ",
          dtype_name(b.dtype()));
}

constexpr double kGeluC = 0.7978845608028654;  // sqrt(2/pi)

class HostBackend final : public Backend {
 public:
  HostBackend() : Backend(std::make_shared<HostAllocator>()) {}
  DeviceKind device() const override { return DeviceKind::host; }
  const char* name() const override { return "host-eigen"; }

  std::vector<double> to_f64(const Tensor& t) const override {
    require_host(t, "to_f64 source");
    std::vector<double> out(static_cast<std::size_t>(t.numel()));
    dispatch(t.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* p = t.data<T>();
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(p[i]);
    });
    return out;
  }

  void assign_f64(Tensor& t, const std::vector<double>& values) const override {
    require_host(t, "assign_f64 target");
    require(static_cast<std::int64_t>(values.size()) == t.numel(), "assign_f64: ", values.size(),
            " values for shape ", shape_string(t.shape()));
    dispatch(t.dtype(), [&](auto zero) {
      using T = decltype(zero);
      T* p = t.data<T>();
      for (std::size_t i = 0; i < values.size(); ++i) p[i] = static_cast<T>(values[i]);
    });
  }

  void fill(Tensor& t, double value) const override {
    require_host(t, "fill target");
    dispatch(t.dtype(), [&](auto zero) {
      using T = decltype(zero);
      std::fill_n(t.data<T>(), t.numel(), static_cast<T>(value));
    });
  }

  void copy(const Tensor& src, Tensor& dst) const override {
    require_host(src, "copy source");
    require_host(dst, "copy target");
    require_same_dtype(src, dst, "copy");
    require(src.numel() == dst.numel(), "copy of ", shape_string(src.shape()), " into ",
            shape_string(dst.shape()));
    if (src.raw_data() != dst.raw_data()) std::memmove(dst.raw_data(), src.raw_data(), src.bytes());
  }

  void copy_block(const Tensor& src, std::int64_t sr0, std::int64_t sc0, Tensor& dst,
                  std::int64_t dr0, std::int64_t dc0, std::int64_t rows,
                  std::int64_t cols) const override {
    require_host(src, "copy_block source");
    require_host(dst, "copy_block target");
    require_same_dtype(src, dst, "copy_block");
    require(sr0 >= 0 && sc0 >= 0 && sr0 + rows <= src.rows() && sc0 + cols <= src.cols(),
            "copy_block: source block out of range");
    require(dr0 >= 0 && dc0 >= 0 && dr0 + rows <= dst.rows() && dc0 + cols <= dst.cols(),
            "copy_block: target block out of range");
    std::size_t es = dtype_size(src.dtype());
    const char* s = static_cast<const char*>(src.raw_data());
    char* d = static_cast<char*>(dst.raw_data());
    for (std::int64_t i = 0; i < rows; ++i)
      std::memcpy(d + ((dr0 + i) * dst.cols() + dc0) * es, s + ((sr0 + i) * src.cols() + sc0) * es,
                  static_cast<std::size_t>(cols) * es);
  }

  void gemm(bool ta, bool tb, double alpha, const Tensor& a, const Tensor& b, double beta,
            Tensor& c) const override {
    require_host(a, "gemm A");
    require_host(b, "gemm B");
    require_host(c, "gemm C");
    require_same_dtype(a, b, "gemm");
    require_same_dtype(a, c, "gemm");
    std::int64_t m = ta ? a.cols() : a.rows(), k = ta ? a.rows() : a.cols();
    std::int64_t kb = tb ? b.cols() : b.rows(), n = tb ? b.rows() : b.cols();
    require(k == kb && c.rows() == m && c.cols() == n, "gemm shapes do not chain: op(A) is ", m,
            "x", k, ", op(B) is ", kb, "x", n, ", C is ", c.rows(), "x", c.cols());
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

  void axpy(double alpha, const Tensor& x, Tensor& y) const override {
    require_host(x, "axpy x");
    require_host(y, "axpy y");
    require_same_dtype(x, y, "axpy");
    require(x.numel() == y.numel(), "axpy of ", shape_string(x.shape()), " into ", shape_string(y.shape()));
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* xp = x.data<T>();
      T* yp = y.data<T>();
      T a = static_cast<T>(alpha);
      for (std::int64_t i = 0; i < x.numel(); ++i) yp[i] += a * xp[i];
    });
  }

  void scale(Tensor& x, double alpha) const override {
    require_host(x, "scale target");
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      T* p = x.data<T>();
      for (std::int64_t i = 0; i < x.numel(); ++i) p[i] *= static_cast<T>(alpha);
    });
  }

  void add_row_vector(Tensor& y, const Tensor& row) const override {
    require_host(y, "add_row_vector target");
    require_host(row, "add_row_vector row");
    require_same_dtype(y, row, "add_row_vector");
    require(row.numel() == y.cols(), "add_row_vector: row of ", row.numel(), " elements for ",
            y.cols(), " columns");
    dispatch(y.dtype(), [&](auto zero) {
      using T = decltype(zero);
      as_matrix<T>(y).rowwise() += Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>(row.data<T>(), row.numel());
    });
  }

  void column_sums(const Tensor& x, Tensor& out, double beta) const override {
    require_host(x, "column_sums source");
    require_host(out, "column_sums target");
    require_same_dtype(x, out, "column_sums");
    require(out.numel() == x.cols(), "column_sums: ", out.numel(), " outputs for ", x.cols(), " columns");
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      auto O = Eigen::Map<Eigen::Matrix<T, 1, Eigen::Dynamic>>(out.data<T>(), out.numel());
      if (beta == 0.0) O.setZero();
      else if (beta != 1.0) O *= static_cast<T>(beta);
      O += as_matrix<T>(x).colwise().sum();
    });
  }

  double sum_squares(const Tensor& x) const override {
    require_host(x, "sum_squares source");
    return dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* p = x.data<T>();
      double s = 0.0;
      for (std::int64_t i = 0; i < x.numel(); ++i) s += static_cast<double>(p[i]) * p[i];
      return s;
    });
  }

  void gelu_forward(const Tensor& x, Tensor& y) const override {
    require_host(x, "gelu x");
    require_host(y, "gelu y");
    require_same_dtype(x, y, "gelu");
    require(x.numel() == y.numel(), "gelu: output shape ", shape_string(y.shape()), " for input ",
            shape_string(x.shape()));
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

  void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) const override {
    require_host(x, "gelu x");
    require_same_dtype(x, dy, "gelu_backward");
    require_same_dtype(x, dx, "gelu_backward");
    require(x.numel() == dy.numel() && x.numel() == dx.numel(), "gelu_backward: shapes differ");
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

  void row_mean_m2(const Tensor& x, Tensor& stats) const override {
    require_host(x, "row_mean_m2 source");
    require(stats.dtype() == DType::f64 && stats.rows() == x.rows() && stats.cols() == 2,
            "row_mean_m2: statistics must be f64 [", x.rows(), ", 2]");
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

  void merge_row_stats(const Tensor& stacked, int parts, std::int64_t count_per_part, double eps,
                       Tensor& mean_rstd) const override {
    require(stacked.dtype() == DType::f64 && mean_rstd.dtype() == DType::f64,
            "merge_row_stats works on f64 statistics");
    std::int64_t rows = mean_rstd.rows();
    require(stacked.rows() == rows * parts, "merge_row_stats: ", stacked.rows(), " stacked rows for ",
            parts, " parts of ", rows);
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

  void layernorm_apply(const Tensor& x, const Tensor& mean_rstd, const Tensor& gamma,
                       const Tensor& beta, Tensor& xhat, Tensor& y) const override {
    require_same_dtype(x, gamma, "layernorm_apply");
    require(gamma.numel() == x.cols() && beta.numel() == x.cols(), "layernorm_apply: gamma/beta of ",
            gamma.numel(), " for ", x.cols(), " columns");
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

  void layernorm_backward_sums(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
                               Tensor& sums) const override {
    require(sums.dtype() == DType::f64 && sums.rows() == dy.rows() && sums.cols() == 2,
            "layernorm_backward_sums: sums must be f64 [", dy.rows(), ", 2]");
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

  void layernorm_backward(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
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

  // Training ops: checked here, computed in host_train_ops.cpp.
  void embedding_forward(const Tensor& table, std::span<const std::int32_t> ids, std::int64_t first_row,
                         Tensor& out) const override {
    require_host(table, "embedding table");
    require_host(out, "embedding output");
    host_ops::check_embedding(table, ids.size(), out, "embedding_forward");
    dispatch(table.dtype(), [&](auto zero) { host_ops::embedding_forward<decltype(zero)>(table, ids, first_row, out); });
  }

  void embedding_backward(const Tensor& dy, std::span<const std::int32_t> ids, std::int64_t first_row,
                          Tensor& table_grad) const override {
    require_host(dy, "embedding output gradient");
    require_host(table_grad, "embedding table gradient");
    host_ops::check_embedding(table_grad, ids.size(), dy, "embedding_backward");
    dispatch(dy.dtype(), [&](auto zero) { host_ops::embedding_backward<decltype(zero)>(dy, ids, first_row, table_grad); });
  }

  void attention_forward(const Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, Tensor& y,
                         Tensor& probs) const override {
    require_host(qkv, "attention qkv");
    require_host(y, "attention output");
    require_host(probs, "attention probabilities");
    host_ops::check_attention(qkv, seq_len, n_head, y, probs, "attention_forward");
    dispatch(qkv.dtype(), [&](auto zero) { host_ops::attention_forward<decltype(zero)>(qkv, seq_len, n_head, y, probs); });
  }

  void attention_backward(const Tensor& dy, const Tensor& qkv, const Tensor& probs, std::int64_t seq_len,
                          std::int64_t n_head, Tensor& dqkv) const override {
    require_host(dy, "attention output gradient");
    require_host(dqkv, "attention qkv gradient");
    host_ops::check_attention(qkv, seq_len, n_head, dy, probs, "attention_backward");
    require(dqkv.shape() == qkv.shape() && dqkv.dtype() == qkv.dtype(), "attention_backward: dqkv has shape ",
            shape_string(dqkv.shape()), "; expected ", shape_string(qkv.shape()));
    dispatch(qkv.dtype(),
             [&](auto zero) { host_ops::attention_backward<decltype(zero)>(dy, qkv, probs, seq_len, n_head, dqkv); });
  }

  void xent_row_max(const Tensor& logits, std::int64_t valid_cols, Tensor& row_max) const override {
    require_host(logits, "cross-entropy logits");
    host_ops::check_xent(logits, valid_cols, 0, row_max, 1, "xent_row_max");
    dispatch(logits.dtype(), [&](auto zero) { host_ops::xent_row_max<decltype(zero)>(logits, valid_cols, row_max); });
  }

  void xent_partial_sums(const Tensor& logits, std::int64_t valid_cols, const Tensor& row_max,
                         std::span<const std::int32_t> targets, std::int64_t col0, Tensor& sums) const override {
    require_host(logits, "cross-entropy logits");
    host_ops::check_xent(logits, valid_cols, targets.size(), row_max, 1, "xent_partial_sums");
    host_ops::check_xent(logits, valid_cols, targets.size(), sums, 2, "xent_partial_sums");
    dispatch(logits.dtype(), [&](auto zero) {
      host_ops::xent_partial_sums<decltype(zero)>(logits, valid_cols, row_max, targets, col0, sums);
    });
  }

  void xent_backward(const Tensor& logits, std::int64_t valid_cols, const Tensor& lse,
                     std::span<const std::int32_t> targets, std::int64_t col0, double scale,
                     Tensor& dlogits) const override {
    require_host(logits, "cross-entropy logits");
    require_host(dlogits, "cross-entropy logit gradient");
    host_ops::check_xent(logits, valid_cols, targets.size(), lse, 1, "xent_backward");
    require_same_dtype(logits, dlogits, "xent_backward");
    require(dlogits.numel() == logits.numel(), "xent_backward: dlogits has shape ", shape_string(dlogits.shape()),
            "; expected ", shape_string(logits.shape()));
    dispatch(logits.dtype(), [&](auto zero) {
      host_ops::xent_backward<decltype(zero)>(logits, valid_cols, lse, targets, col0, scale, dlogits);
    });
  }

  void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& step) const override {
    for (const Tensor* t : {static_cast<const Tensor*>(&param), &grad, static_cast<const Tensor*>(&m), static_cast<const Tensor*>(&v)}) {
      require_host(*t, "adamw tensor");
      require_same_dtype(param, *t, "adamw_update");
      require(t->numel() == param.numel(), "adamw_update: a tensor of shape ", shape_string(t->shape()),
              " for a parameter of shape ", shape_string(param.shape()));
    }
    require(step.step >= 1, "adamw_update: step counts from 1; got ", step.step);
    dispatch(param.dtype(), [&](auto zero) { host_ops::adamw_update<decltype(zero)>(param, grad, m, v, step); });
  }
};

}  // namespace

std::unique_ptr<Backend> make_host_backend() { return std::make_unique<HostBackend>(); }

}  // namespace mdtp
