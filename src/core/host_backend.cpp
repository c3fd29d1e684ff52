// Host backend: GEMM through host_gemm (the BLAS, else Eigen), the element-wise and LayerNorm
// kernels of host_elementwise / host_layernorm, and Eigen array expressions for the simple ops
// (all vectorised; they are memory-bound); memory from a CachingHostAllocator.  Each op
// dispatches once on the element type; the Backend front has validated the arguments.  An op with
// a bf16/f16 operand goes to host_low_precision (f32 kernels on widened blocks).
#include "core/eigen_core.hpp"  // before the other headers: see there

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/backend.hpp"
#include "core/blas_library.hpp"
#include "core/cpu_features.hpp"
#include "core/host_elementwise.hpp"
#include "core/host_caching_allocator.hpp"
#include "core/host_gemm.hpp"
#include "core/host_layernorm.hpp"
#include "core/host_low_precision.hpp"
#include "core/convert.hpp"
#include "core/large_allocations.hpp"

namespace mdtp {
namespace {

template <class T>
using ArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;

template <class T>
ArrayMap<T> as_array(const Tensor& t) {
  return ArrayMap<T>(t.data<T>(), t.numel());
}

template <class Fn>
decltype(auto) dispatch(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32: return fn(float{});
    case DType::f64: return fn(double{});
    default: throw_error("the host backend computes in f32 or f64; got ", dtype_name(dtype));
  }
}

// "host-openblas", "host-mkl", … or "host-eigen": which GEMM the backend runs.
std::string backend_name() {
  if (default_gemm_engine() == GemmEngine::eigen) return "host-eigen";
  return "host-" + blas_library().vendor;
}

class HostBackend final : public Backend {
 public:
  explicit HostBackend(std::shared_ptr<Allocator> allocator) : Backend(std::move(allocator)), name_(backend_name()) {}
  DeviceKind device() const override { return DeviceKind::host; }
  const char* name() const override { return name_.c_str(); }
  bool computes_in(DType) const override { return true; }  // f32, f64; bf16 and f16 in f32

 protected:
  std::vector<double> do_to_f64(const Tensor& t) const override {
    std::vector<double> out(static_cast<std::size_t>(t.numel()));
    convert_host(t.dtype(), t.raw_data(), DType::f64, out.data(), out.size());
    return out;
  }

  void do_assign_f64(Tensor& t, const std::vector<double>& values) const override {
    convert_host(DType::f64, values.data(), t.dtype(), t.raw_data(), values.size());
  }

  void do_convert(const Tensor& src, Tensor& dst) const override {
    convert_host(src.dtype(), src.raw_data(), dst.dtype(), dst.raw_data(), static_cast<std::size_t>(src.numel()));
  }

  void do_fill(Tensor& t, double value) const override {
    if (is_16bit(t.dtype())) return low_.fill(t, value);
    dispatch(t.dtype(), [&](auto zero) {
      using T = decltype(zero);
      std::fill_n(t.data<T>(), t.numel(), static_cast<T>(value));
    });
  }

  void do_copy(const Tensor& src, Tensor& dst) const override {
    if (src.raw_data() != dst.raw_data()) std::memmove(dst.raw_data(), src.raw_data(), src.bytes());
  }

  void do_copy_block(const Tensor& src, std::int64_t sr0, std::int64_t sc0, Tensor& dst, std::int64_t dr0,
                     std::int64_t dc0, std::int64_t rows, std::int64_t cols) const override {
    std::size_t es = dtype_size(src.dtype());
    const char* s = static_cast<const char*>(src.raw_data());
    char* d = static_cast<char*>(dst.raw_data());
    for (std::int64_t i = 0; i < rows; ++i)
      std::memcpy(d + ((dr0 + i) * dst.cols() + dc0) * es, s + ((sr0 + i) * src.cols() + sc0) * es,
                  static_cast<std::size_t>(cols) * es);
  }

  void do_gemm(bool ta, bool tb, double alpha, const Tensor& a, const Tensor& b, double beta,
               Tensor& c) const override {
    if (is_16bit(a.dtype())) return low_.gemm(ta, tb, alpha, a, b, beta, c);
    const std::int64_t m = c.rows(), n = c.cols(), k = ta ? a.rows() : a.cols();
    dispatch(a.dtype(), [&](auto zero) {
      using T = decltype(zero);
      host_gemm<T>(ta, tb, m, n, k, static_cast<T>(alpha), a.data<T>(), a.cols(), b.data<T>(), b.cols(),
                   static_cast<T>(beta), c.data<T>(), n);
    });
  }

  void do_axpy(double alpha, const Tensor& x, Tensor& y) const override {
    if (is_16bit(x.dtype())) return low_.axpy(alpha, x, y);
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      as_array<T>(y) += static_cast<T>(alpha) * as_array<T>(x);
    });
  }

  void do_scale(Tensor& x, double alpha) const override {
    if (is_16bit(x.dtype())) return low_.scale(x, alpha);
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      as_array<T>(x) *= static_cast<T>(alpha);
    });
  }

  void do_add_row_vector(Tensor& y, const Tensor& row) const override {
    if (is_16bit(y.dtype())) return low_.add_row_vector(y, row);
    dispatch(y.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const ArrayMap<T> r(row.data<T>(), row.numel());
      for (std::int64_t i = 0; i < y.rows(); ++i) ArrayMap<T>(y.data<T>() + i * y.cols(), y.cols()) += r;
    });
  }

  // Row by row (each a vectorised pass over the columns), in row order: the same sums as a
  // serial loop, at vector speed.
  void do_column_sums(const Tensor& x, Tensor& out, double beta) const override {
    if (is_16bit(x.dtype())) return low_.column_sums(x, out, beta);
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      ArrayMap<T> o(out.data<T>(), out.numel());
      if (beta == 0.0) o.setZero();
      else if (beta != 1.0) o *= static_cast<T>(beta);
      for (std::int64_t i = 0; i < x.rows(); ++i) o += ArrayMap<T>(x.data<T>() + i * x.cols(), x.cols());
    });
  }

  double do_sum_squares(const Tensor& x) const override {
    if (is_16bit(x.dtype())) return low_.sum_squares(x);
    return dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      return as_array<T>(x).template cast<double>().square().sum();
    });
  }

  void do_gelu_forward(const Tensor& x, Tensor& y) const override {
    if (is_16bit(x.dtype())) return low_.gelu_forward(x, y);
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      mdtp::gelu_forward(x.data<T>(), y.data<T>(), x.numel());
    });
  }

  void do_gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) const override {
    if (is_16bit(x.dtype())) return low_.gelu_backward(x, dy, dx);
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      mdtp::gelu_backward(x.data<T>(), dy.data<T>(), dx.data<T>(), x.numel());
    });
  }

  void do_row_mean_m2(const Tensor& x, Tensor& stats) const override {
    if (is_16bit(x.dtype())) return low_.row_mean_m2(x, stats);
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      mdtp::row_mean_m2(x.data<T>(), x.rows(), x.cols(), stats.data<double>());
    });
  }

  void do_merge_row_stats(const Tensor& stacked, int parts, std::int64_t count_per_part, double eps,
                          Tensor& mean_rstd, bool centred) const override {
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
      // Uncentred (RMSNorm): the mean square is mean² + the variance.
      out[2 * i] = centred ? mean : 0.0;
      out[2 * i + 1] = 1.0 / std::sqrt((centred ? 0.0 : mean * mean) + m2 / n + eps);
    }
  }

  void do_layernorm_apply(const Tensor& x, const Tensor& mean_rstd, const Tensor& gamma, const Tensor& beta,
                          Tensor& xhat, Tensor& y) const override {
    if (is_16bit(x.dtype())) return low_.layernorm_apply(x, mean_rstd, gamma, beta, xhat, y);
    dispatch(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      mdtp::layernorm_apply(x.data<T>(), mean_rstd.data<double>(), gamma.data<T>(), beta.data<T>(), x.rows(), x.cols(),
                      xhat.data<T>(), y.data<T>());
    });
  }

  void do_layernorm_backward_sums(const Tensor& dy, const Tensor& xhat, const Tensor& gamma, Tensor& sums,
                                  bool centred) const override {
    if (is_16bit(dy.dtype())) {
      low_.layernorm_backward_sums(dy, xhat, gamma, sums);
    } else {
      dispatch(dy.dtype(), [&](auto zero) {
        using T = decltype(zero);
        mdtp::layernorm_backward_sums(dy.data<T>(), xhat.data<T>(), gamma.data<T>(), dy.rows(), dy.cols(),
                                      sums.data<double>());
      });
    }
    if (!centred)
      for (std::int64_t i = 0; i < sums.rows(); ++i) sums.data<double>()[2 * i] = 0.0;
  }

  void do_layernorm_backward(const Tensor& dy, const Tensor& xhat, const Tensor& gamma, const Tensor& mean_rstd,
                             const Tensor& sums, std::int64_t n, Tensor& dx, Tensor& dgamma,
                             Tensor& dbeta) const override {
    if (is_16bit(dy.dtype())) return low_.layernorm_backward(dy, xhat, gamma, mean_rstd, sums, n, dx, dgamma, dbeta);
    dispatch(dy.dtype(), [&](auto zero) {
      using T = decltype(zero);
      mdtp::layernorm_backward(dy.data<T>(), xhat.data<T>(), gamma.data<T>(), mean_rstd.data<double>(),
                         sums.data<double>(), n, dy.rows(), dy.cols(), dx.data<T>(), dgamma.data<T>(),
                         dbeta.data<T>());
    });
  }

  void do_adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& step) const override {
    dispatch(param.dtype(), [&](auto zero) {
      using T = decltype(zero);
      mdtp::adamw_update(param.data<T>(), grad.data<T>(), m.data<T>(), v.data<T>(), param.numel(), step);
    });
  }

 private:
  std::string name_;
  // The 16-bit ops' scratch: one rank's backend is used by one thread at a time.
  mutable LowPrecisionOps low_;
};

}  // namespace

std::unique_ptr<Backend> make_host_backend() { return make_host_backend(std::make_shared<CachingHostAllocator>()); }

std::unique_ptr<Backend> make_host_backend(std::shared_ptr<Allocator> allocator) {
  // A binary built with -march=native elsewhere would die on its first vector instruction here.
  const std::vector<std::string> missing = missing_compiled_flags(cpu_features());
  require(missing.empty(), "this mdtp was compiled for ", join_flags(missing), ", which this CPU (",
          cpu_features().model, ") lacks; rebuild here, or with -DMDTP_NATIVE=OFF for a portable binary");
  large_allocation_policy();  // MPI's per-call temporaries reused, not faulted in again (large_allocations.hpp)
  return std::make_unique<HostBackend>(std::move(allocator));
}

}  // namespace mdtp
