#pragma once
// Serial float64 references, written independently of the layers under test: plain loops over
// full row-major matrices.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace mdtp::testing {

struct Matrix {
  std::int64_t rows = 0, cols = 0;
  std::vector<double> v;
  Matrix() = default;
  Matrix(std::int64_t r, std::int64_t c) : rows(r), cols(c), v(static_cast<std::size_t>(r * c), 0.0) {}
  double& at(std::int64_t i, std::int64_t j) { return v[static_cast<std::size_t>(i * cols + j)]; }
  double at(std::int64_t i, std::int64_t j) const { return v[static_cast<std::size_t>(i * cols + j)]; }
};

// op(A)·op(B)
inline Matrix matmul(const Matrix& a, const Matrix& b, bool ta = false, bool tb = false) {
  std::int64_t m = ta ? a.cols : a.rows, k = ta ? a.rows : a.cols, n = tb ? b.rows : b.cols;
  Matrix c(m, n);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t p = 0; p < k; ++p) {
      double x = ta ? a.at(p, i) : a.at(i, p);
      for (std::int64_t j = 0; j < n; ++j) c.at(i, j) += x * (tb ? b.at(j, p) : b.at(p, j));
    }
  return c;
}

inline Matrix add_row(Matrix y, const std::vector<double>& b) {
  for (std::int64_t i = 0; i < y.rows; ++i)
    for (std::int64_t j = 0; j < y.cols; ++j) y.at(i, j) += b[static_cast<std::size_t>(j)];
  return y;
}

inline std::vector<double> column_sums(const Matrix& x) {
  std::vector<double> s(static_cast<std::size_t>(x.cols), 0.0);
  for (std::int64_t i = 0; i < x.rows; ++i)
    for (std::int64_t j = 0; j < x.cols; ++j) s[static_cast<std::size_t>(j)] += x.at(i, j);
  return s;
}

inline double gelu(double x) {
  return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
inline double gelu_grad(double x) {
  double u = 0.7978845608028654 * (x + 0.044715 * x * x * x), t = std::tanh(u);
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
}

struct LayerNormRef {
  Matrix y, dx;
  std::vector<double> dgamma, dbeta;
};

// y = (x-μ)/sqrt(σ²+eps)·γ + β per row, and the gradients for dy.
inline LayerNormRef layernorm(const Matrix& x, const std::vector<double>& g, const std::vector<double>& b,
                              const Matrix& dy, double eps = 1e-5) {
  LayerNormRef r{Matrix(x.rows, x.cols), Matrix(x.rows, x.cols), std::vector<double>(g.size(), 0.0),
                 std::vector<double>(g.size(), 0.0)};
  const double n = static_cast<double>(x.cols);
  for (std::int64_t i = 0; i < x.rows; ++i) {
    double mean = 0, var = 0;
    for (std::int64_t j = 0; j < x.cols; ++j) mean += x.at(i, j);
    mean /= n;
    for (std::int64_t j = 0; j < x.cols; ++j) var += (x.at(i, j) - mean) * (x.at(i, j) - mean);
    var /= n;
    double rstd = 1.0 / std::sqrt(var + eps);
    std::vector<double> xh(static_cast<std::size_t>(x.cols));
    double s1 = 0, s2 = 0;
    for (std::int64_t j = 0; j < x.cols; ++j) {
      auto u = static_cast<std::size_t>(j);
      xh[u] = (x.at(i, j) - mean) * rstd;
      r.y.at(i, j) = xh[u] * g[u] + b[u];
      double dxh = dy.at(i, j) * g[u];
      s1 += dxh;
      s2 += dxh * xh[u];
      r.dgamma[u] += dy.at(i, j) * xh[u];
      r.dbeta[u] += dy.at(i, j);
    }
    for (std::int64_t j = 0; j < x.cols; ++j) {
      auto u = static_cast<std::size_t>(j);
      r.dx.at(i, j) = rstd * (dy.at(i, j) * g[u] - s1 / n - xh[u] * s2 / n);
    }
  }
  return r;
}

// ‖got − ref‖∞ / ‖ref‖∞ (docs/theory.md §8: element-wise relative error is meaningless near zeros).
inline double relative_error(const std::vector<double>& got, const std::vector<double>& ref) {
  if (got.size() != ref.size()) return INFINITY;
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(got[i])) return INFINITY;
    num = std::max(num, std::abs(got[i] - ref[i]));
    den = std::max(den, std::abs(ref[i]));
  }
  return den == 0 ? num : num / den;
}

}  // namespace mdtp::testing
