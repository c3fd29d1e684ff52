#include "core/eigen_core.hpp"  // before the other headers: see there

#include "core/host_low_precision.hpp"

#include <algorithm>
#include <cstring>

#include "core/convert.hpp"
#include "core/host_elementwise.hpp"
#include "core/host_gemm.hpp"
#include "core/host_layernorm.hpp"

namespace mdtp {
namespace {

using FloatArray = Eigen::Map<Eigen::Array<float, Eigen::Dynamic, 1>>;

// Elements per block of an element-wise op, and per row block of a row op: a few hundred KiB of
// f32, so that a block stays in cache between widening, computing and narrowing.
constexpr std::int64_t kBlockElements = 1 << 14;

std::int64_t rows_per_block(std::int64_t cols) { return std::max<std::int64_t>(1, kBlockElements / std::max<std::int64_t>(cols, 1)); }

const unsigned char* bytes_at(const Tensor& t, std::int64_t element) {
  return static_cast<const unsigned char*>(t.raw_data()) + element * static_cast<std::int64_t>(dtype_size(t.dtype()));
}

unsigned char* bytes_at(Tensor& t, std::int64_t element) {
  return static_cast<unsigned char*>(t.raw_data()) + element * static_cast<std::int64_t>(dtype_size(t.dtype()));
}

// f32 copies of elements [first, first + n) of `t` (any dtype), and back.
void widen(const Tensor& t, std::int64_t first, std::int64_t n, float* out) {
  widen_to_f32(t.dtype(), bytes_at(t, first), out, static_cast<std::size_t>(n));
}

void narrow(const float* in, Tensor& t, std::int64_t first, std::int64_t n) {
  narrow_from_f32(in, t.dtype(), bytes_at(t, first), static_cast<std::size_t>(n));
}

// The rows x cols block at (r0, c0) of a 2-D view, widened into `out` (row-major, leading
// dimension cols), and back.
void widen_block(const Tensor& t, std::int64_t r0, std::int64_t c0, std::int64_t rows, std::int64_t cols,
                 float* out) {
  if (c0 == 0 && cols == t.cols()) return widen(t, r0 * t.cols(), rows * cols, out);
  for (std::int64_t i = 0; i < rows; ++i) widen(t, (r0 + i) * t.cols() + c0, cols, out + i * cols);
}

void narrow_block(const float* in, Tensor& t, std::int64_t r0, std::int64_t c0, std::int64_t rows,
                  std::int64_t cols) {
  if (c0 == 0 && cols == t.cols()) return narrow(in, t, r0 * t.cols(), rows * cols);
  for (std::int64_t i = 0; i < rows; ++i) narrow(in + i * cols, t, (r0 + i) * t.cols() + c0, cols);
}

}  // namespace

float* LowPrecisionOps::scratch(int slot, std::size_t floats) {
  std::vector<float>& s = scratch_[slot];
  if (s.size() < floats) s.resize(floats);
  return s.data();
}

void LowPrecisionOps::fill(Tensor& t, double value) {
  std::uint16_t pattern = 0;
  convert_host(DType::f64, &value, t.dtype(), &pattern, 1);
  std::fill_n(static_cast<std::uint16_t*>(t.raw_data()), t.numel(), pattern);
}

void LowPrecisionOps::gemm(bool ta, bool tb, double alpha, const Tensor& a, const Tensor& b, double beta, Tensor& c) {
  const std::int64_t m = c.rows(), n = c.cols(), k = ta ? a.rows() : a.cols();
  const bool c_wide = c.dtype() == DType::f32;
  const std::int64_t budget = kGemmScratchFloats, k1 = std::max<std::int64_t>(k, 1);
  // B's column block takes up to half the scratch, A's row block and a 16-bit C's block a quarter
  // each; blocks of at least 64, so that each sgemm call still runs at the BLAS's speed.
  const std::int64_t nb = std::min(n, std::max<std::int64_t>(64, budget / 2 / k1));
  std::int64_t mb = std::min(m, std::max<std::int64_t>(64, budget / 4 / k1));
  if (!c_wide) mb = std::min(mb, std::max<std::int64_t>(64, budget / 4 / std::max<std::int64_t>(nb, 1)));
  const float fa = static_cast<float>(alpha), fb = static_cast<float>(beta);
  for (std::int64_t j0 = 0; j0 < n; j0 += nb) {
    const std::int64_t jn = std::min(nb, n - j0);
    // op(B)[:, j0:j0+jn]: B's columns j0.. (k x jn), or, transposed, B's rows j0.. (jn x k).
    float* bw = scratch(0, static_cast<std::size_t>(jn * k));
    if (tb) widen_block(b, j0, 0, jn, k, bw);
    else widen_block(b, 0, j0, k, jn, bw);
    const std::int64_t ldb = tb ? k : jn;
    for (std::int64_t i0 = 0; i0 < m; i0 += mb) {
      const std::int64_t in = std::min(mb, m - i0);
      float* aw = scratch(1, static_cast<std::size_t>(in * k));
      if (ta) widen_block(a, 0, i0, k, in, aw);
      else widen_block(a, i0, 0, in, k, aw);
      const std::int64_t lda = ta ? in : k;
      if (c_wide) {
        host_gemm<float>(ta, tb, in, jn, k, fa, aw, lda, bw, ldb, fb, c.data<float>() + i0 * n + j0, n);
        continue;
      }
      float* cw = scratch(2, static_cast<std::size_t>(in * jn));
      if (beta != 0.0) widen_block(c, i0, j0, in, jn, cw);
      host_gemm<float>(ta, tb, in, jn, k, fa, aw, lda, bw, ldb, fb, cw, jn);
      narrow_block(cw, c, i0, j0, in, jn);
    }
  }
}

void LowPrecisionOps::axpy(double alpha, const Tensor& x, Tensor& y) {
  const float fa = static_cast<float>(alpha);
  for (std::int64_t i0 = 0; i0 < x.numel(); i0 += kBlockElements) {
    const std::int64_t n = std::min(kBlockElements, x.numel() - i0);
    float* xs = scratch(0, static_cast<std::size_t>(n));
    widen(x, i0, n, xs);
    if (y.dtype() == DType::f32) {
      FloatArray(y.data<float>() + i0, n) += fa * FloatArray(xs, n);
      continue;
    }
    float* ys = scratch(1, static_cast<std::size_t>(n));
    widen(y, i0, n, ys);
    FloatArray(ys, n) += fa * FloatArray(xs, n);
    narrow(ys, y, i0, n);
  }
}

void LowPrecisionOps::scale(Tensor& x, double alpha) {
  const float fa = static_cast<float>(alpha);
  for (std::int64_t i0 = 0; i0 < x.numel(); i0 += kBlockElements) {
    const std::int64_t n = std::min(kBlockElements, x.numel() - i0);
    float* xs = scratch(0, static_cast<std::size_t>(n));
    widen(x, i0, n, xs);
    FloatArray(xs, n) *= fa;
    narrow(xs, x, i0, n);
  }
}

void LowPrecisionOps::add_row_vector(Tensor& y, const Tensor& row) {
  const std::int64_t cols = y.cols(), rb = rows_per_block(cols);
  float* r = scratch(0, static_cast<std::size_t>(cols));
  widen(row, 0, cols, r);
  const FloatArray rv(r, cols);
  for (std::int64_t r0 = 0; r0 < y.rows(); r0 += rb) {
    const std::int64_t rows = std::min(rb, y.rows() - r0);
    float* ys = scratch(1, static_cast<std::size_t>(rows * cols));
    widen(y, r0 * cols, rows * cols, ys);
    for (std::int64_t i = 0; i < rows; ++i) FloatArray(ys + i * cols, cols) += rv;
    narrow(ys, y, r0 * cols, rows * cols);
  }
}

// Row by row in row order, as the f32 path sums, into an f32 accumulator rounded once at the end
// when `out` is 16-bit.
void LowPrecisionOps::column_sums(const Tensor& x, Tensor& out, double beta) {
  const std::int64_t cols = x.cols(), rb = rows_per_block(cols);
  float* acc = out.dtype() == DType::f32 ? out.data<float>() : scratch(0, static_cast<std::size_t>(cols));
  FloatArray o(acc, cols);
  if (out.dtype() != DType::f32 && beta != 0.0) widen(out, 0, cols, acc);
  if (beta == 0.0) o.setZero();
  else if (beta != 1.0) o *= static_cast<float>(beta);
  for (std::int64_t r0 = 0; r0 < x.rows(); r0 += rb) {
    const std::int64_t rows = std::min(rb, x.rows() - r0);
    float* xs = scratch(1, static_cast<std::size_t>(rows * cols));
    widen(x, r0 * cols, rows * cols, xs);
    for (std::int64_t i = 0; i < rows; ++i) o += FloatArray(xs + i * cols, cols);
  }
  if (out.dtype() != DType::f32) narrow(acc, out, 0, cols);
}

// Σ x² in double, block by block in element order.
double LowPrecisionOps::sum_squares(const Tensor& x) {
  double total = 0.0;
  for (std::int64_t i0 = 0; i0 < x.numel(); i0 += kBlockElements) {
    const std::int64_t n = std::min(kBlockElements, x.numel() - i0);
    float* xs = scratch(0, static_cast<std::size_t>(n));
    widen(x, i0, n, xs);
    total += FloatArray(xs, n).cast<double>().square().sum();
  }
  return total;
}

void LowPrecisionOps::gelu_forward(const Tensor& x, Tensor& y) {
  for (std::int64_t i0 = 0; i0 < x.numel(); i0 += kBlockElements) {
    const std::int64_t n = std::min(kBlockElements, x.numel() - i0);
    float *xs = scratch(0, static_cast<std::size_t>(n)), *ys = scratch(1, static_cast<std::size_t>(n));
    widen(x, i0, n, xs);
    mdtp::gelu_forward(xs, ys, n);
    narrow(ys, y, i0, n);
  }
}

void LowPrecisionOps::gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  for (std::int64_t i0 = 0; i0 < x.numel(); i0 += kBlockElements) {
    const std::int64_t n = std::min(kBlockElements, x.numel() - i0);
    float *xs = scratch(0, static_cast<std::size_t>(n)), *ds = scratch(1, static_cast<std::size_t>(n));
    float* out = scratch(2, static_cast<std::size_t>(n));
    widen(x, i0, n, xs);
    widen(dy, i0, n, ds);
    mdtp::gelu_backward(xs, ds, out, n);
    narrow(out, dx, i0, n);
  }
}

void LowPrecisionOps::row_mean_m2(const Tensor& x, Tensor& stats) {
  const std::int64_t cols = x.cols(), rb = rows_per_block(cols);
  for (std::int64_t r0 = 0; r0 < x.rows(); r0 += rb) {
    const std::int64_t rows = std::min(rb, x.rows() - r0);
    float* xs = scratch(0, static_cast<std::size_t>(rows * cols));
    widen(x, r0 * cols, rows * cols, xs);
    mdtp::row_mean_m2(xs, rows, cols, stats.data<double>() + 2 * r0);
  }
}

void LowPrecisionOps::layernorm_apply(const Tensor& x, const Tensor& mean_rstd, const Tensor& gamma,
                                      const Tensor& beta, Tensor& xhat, Tensor& y) {
  const std::int64_t cols = x.cols(), rb = rows_per_block(cols);
  float* g = scratch(0, static_cast<std::size_t>(2 * cols));
  float* b = g + cols;
  widen(gamma, 0, cols, g);
  widen(beta, 0, cols, b);
  for (std::int64_t r0 = 0; r0 < x.rows(); r0 += rb) {
    const std::int64_t rows = std::min(rb, x.rows() - r0), n = rows * cols;
    float* xs = scratch(1, static_cast<std::size_t>(n));
    float* hs = scratch(2, static_cast<std::size_t>(2 * n));
    float* ys = hs + n;
    widen(x, r0 * cols, n, xs);
    mdtp::layernorm_apply(xs, mean_rstd.data<double>() + 2 * r0, g, b, rows, cols, hs, ys);
    narrow(hs, xhat, r0 * cols, n);
    narrow(ys, y, r0 * cols, n);
  }
}

void LowPrecisionOps::layernorm_backward_sums(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
                                              Tensor& sums) {
  const std::int64_t cols = dy.cols(), rb = rows_per_block(cols);
  float* g = scratch(0, static_cast<std::size_t>(cols));
  widen(gamma, 0, cols, g);
  for (std::int64_t r0 = 0; r0 < dy.rows(); r0 += rb) {
    const std::int64_t rows = std::min(rb, dy.rows() - r0), n = rows * cols;
    float* ds = scratch(1, static_cast<std::size_t>(2 * n));
    float* hs = ds + n;
    widen(dy, r0 * cols, n, ds);
    widen(xhat, r0 * cols, n, hs);
    mdtp::layernorm_backward_sums(ds, hs, g, rows, cols, sums.data<double>() + 2 * r0);
  }
}

// dγ and dβ accumulate row by row in f32 (into the tensors themselves when they are f32, else into
// scratch rounded once at the end), as the f32 kernel does over all rows.
void LowPrecisionOps::layernorm_backward(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
                                         const Tensor& mean_rstd, const Tensor& sums, std::int64_t n, Tensor& dx,
                                         Tensor& dgamma, Tensor& dbeta) {
  const std::int64_t cols = dy.cols(), rb = rows_per_block(cols);
  float* g = scratch(0, static_cast<std::size_t>(3 * cols));
  widen(gamma, 0, cols, g);
  const bool wide = dgamma.dtype() == DType::f32;
  float* dg = wide ? dgamma.data<float>() : g + cols;
  float* db = wide ? dbeta.data<float>() : g + 2 * cols;
  if (!wide) {
    widen(dgamma, 0, cols, dg);
    widen(dbeta, 0, cols, db);
  }
  for (std::int64_t r0 = 0; r0 < dy.rows(); r0 += rb) {
    const std::int64_t rows = std::min(rb, dy.rows() - r0), e = rows * cols;
    float* ds = scratch(1, static_cast<std::size_t>(2 * e));
    float* hs = ds + e;
    float* out = scratch(2, static_cast<std::size_t>(e));
    widen(dy, r0 * cols, e, ds);
    widen(xhat, r0 * cols, e, hs);
    mdtp::layernorm_backward(ds, hs, g, mean_rstd.data<double>() + 2 * r0, sums.data<double>() + 2 * r0, n, rows,
                             cols, out, dg, db);
    narrow(out, dx, r0 * cols, e);
  }
  if (!wide) {
    narrow(dg, dgamma, 0, cols);
    narrow(db, dbeta, 0, cols);
  }
}

}  // namespace mdtp
