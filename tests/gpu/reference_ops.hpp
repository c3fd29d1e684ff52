#pragma once
// Float64 references of the ops in src/cuda/train_ops.hpp, which the host backend does not have
// (yet): row softmax (plain or causal) and its backward, whole-row cross-entropy, AdamW with the
// textbook (PyTorch) formulas.  Shared by the small and the realistic-size GPU tests.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/backend.hpp"

namespace mdtp::gpu_test {

// Row softmax of [rows, cols] with softmax_rows's causal rule: queries > 0 means the rows are
// (.., query) rows of [.., queries, cols] scores and query q sees columns j <= q + cols - queries;
// masked entries (and fully masked rows) are 0.  queries = 0: no mask.
inline std::vector<double> softmax_ref(const std::vector<double>& x, std::int64_t rows, std::int64_t cols,
                                       std::int64_t queries) {
  std::vector<double> y(x.size(), 0.0);
  for (std::int64_t i = 0; i < rows; ++i) {
    const std::int64_t last = queries > 0 ? i % queries + cols - queries : cols - 1;
    if (last < 0) continue;
    const double* xi = x.data() + i * cols;
    double mx = -INFINITY, s = 0.0;
    for (std::int64_t j = 0; j <= last; ++j) mx = std::max(mx, xi[j]);
    for (std::int64_t j = 0; j <= last; ++j) s += std::exp(xi[j] - mx);
    for (std::int64_t j = 0; j <= last; ++j) y[i * cols + j] = std::exp(xi[j] - mx) / s;
  }
  return y;
}

// dx = y * (dy - rowsum(dy * y)) over [rows, cols].
inline std::vector<double> softmax_backward_ref(const std::vector<double>& y, const std::vector<double>& dy,
                                                std::int64_t rows, std::int64_t cols) {
  std::vector<double> dx(y.size());
  for (std::int64_t i = 0; i < rows; ++i) {
    double dot = 0.0;
    for (std::int64_t j = 0; j < cols; ++j) dot += y[i * cols + j] * dy[i * cols + j];
    for (std::int64_t j = 0; j < cols; ++j) dx[i * cols + j] = y[i * cols + j] * (dy[i * cols + j] - dot);
  }
  return dx;
}

// Whole-row cross-entropy of logits [rows, vocab]: lse, loss (0 for a negative target) and
// dlogits = scale * (softmax - onehot) (0 rows for ignored targets).
struct CrossEntropyRef {
  std::vector<double> lse, loss, dlogits;
};
inline CrossEntropyRef cross_entropy_ref(const std::vector<double>& logits, const std::vector<std::int32_t>& targets,
                                         std::int64_t vocab, double scale) {
  const auto rows = static_cast<std::int64_t>(targets.size());
  CrossEntropyRef r{std::vector<double>(rows), std::vector<double>(rows), std::vector<double>(logits.size(), 0.0)};
  for (std::int64_t i = 0; i < rows; ++i) {
    const double* li = logits.data() + i * vocab;
    double mx = -INFINITY, s = 0.0;
    for (std::int64_t j = 0; j < vocab; ++j) mx = std::max(mx, li[j]);
    for (std::int64_t j = 0; j < vocab; ++j) s += std::exp(li[j] - mx);
    r.lse[i] = mx + std::log(s);
    const std::int32_t t = targets[i];
    r.loss[i] = t < 0 ? 0.0 : r.lse[i] - li[t];
    if (t >= 0)
      for (std::int64_t j = 0; j < vocab; ++j)
        r.dlogits[i * vocab + j] = scale * (std::exp(li[j] - r.lse[i]) - (j == t ? 1.0 : 0.0));
  }
  return r;
}

// PyTorch's AdamW (decoupled weight decay, bias-corrected moments) in float64, the textbook form
// (the kernels use the host backend's algebraically equal one), over grads[s-1] for steps
// first_step..first_step+len-1; w, m, v are updated in place.
inline void adamw_ref(AdamWStep cfg, std::int64_t first_step, const std::vector<std::vector<double>>& grads,
                      std::vector<double>& w, std::vector<double>& m, std::vector<double>& v) {
  for (std::size_t s = 0; s < grads.size(); ++s) {
    const double t = static_cast<double>(first_step) + static_cast<double>(s);
    for (std::size_t i = 0; i < w.size(); ++i) {
      const double g = grads[s][i] * cfg.grad_scale;
      w[i] -= cfg.lr * cfg.weight_decay * w[i];
      m[i] = cfg.beta1 * m[i] + (1 - cfg.beta1) * g;
      v[i] = cfg.beta2 * v[i] + (1 - cfg.beta2) * g * g;
      const double mhat = m[i] / (1 - std::pow(cfg.beta1, t)), vhat = v[i] / (1 - std::pow(cfg.beta2, t));
      w[i] -= cfg.lr * mhat / (std::sqrt(vhat) + cfg.eps);
    }
  }
}

}  // namespace mdtp::gpu_test
