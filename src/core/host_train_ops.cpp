#include "core/host_train_ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace mdtp::host_ops {
namespace {

std::size_t at(std::int64_t row, std::int64_t cols, std::int64_t col) {
  return static_cast<std::size_t>(row * cols + col);
}

}  // namespace

void check_embedding(const Tensor& table, std::size_t ids, const Tensor& rows_tensor, const char* op) {
  require(table.ndim() == 2, op, ": the table must be 2-D; got shape ", shape_string(table.shape()));
  require(rows_tensor.rows() == static_cast<std::int64_t>(ids) && rows_tensor.cols() == table.cols(), op, ": ",
          ids, " ids need rows of [", ids, ", ", table.cols(), "]; got shape ", shape_string(rows_tensor.shape()));
  require(table.dtype() == rows_tensor.dtype(), op, ": mixed dtypes ", dtype_name(table.dtype()), " and ",
          dtype_name(rows_tensor.dtype()));
}

void check_attention(const Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, const Tensor& y,
                     const Tensor& probs, const char* op) {
  require(seq_len > 0 && n_head > 0, op, ": seq_len and n_head must be positive; got ", seq_len, " and ", n_head);
  require(qkv.rows() % seq_len == 0, op, ": ", qkv.rows(), " rows are not whole sequences of ", seq_len);
  require(qkv.cols() % (3 * n_head) == 0, op, ": qkv has ", qkv.cols(), " columns; expected a multiple of 3·n_head=",
          3 * n_head);
  const std::int64_t width = qkv.cols() / 3;
  require(y.rows() == qkv.rows() && y.cols() == width, op, ": output shape ", shape_string(y.shape()),
          "; expected [", qkv.rows(), ", ", width, "]");
  require(probs.numel() == qkv.rows() / seq_len * n_head * seq_len * seq_len, op, ": probs has ", probs.numel(),
          " elements; expected sequences·n_head·seq_len² = ", qkv.rows() / seq_len * n_head * seq_len * seq_len);
  require(qkv.dtype() == y.dtype() && qkv.dtype() == probs.dtype(), op, ": qkv, y and probs must share a dtype");
}

void check_xent(const Tensor& logits, std::int64_t valid_cols, std::size_t targets, const Tensor& stats,
                std::int64_t stats_cols, const char* op) {
  require(valid_cols >= 0 && valid_cols <= logits.cols(), op, ": valid_cols=", valid_cols, " outside [0, ",
          logits.cols(), "]");
  require(static_cast<std::int64_t>(targets) == logits.rows() || targets == 0, op, ": ", targets,
          " targets for ", logits.rows(), " rows");
  require(stats.dtype() == DType::f64 && stats.numel() == logits.rows() * stats_cols, op,
          ": statistics must be f64 with ", logits.rows() * stats_cols, " elements; got ",
          dtype_name(stats.dtype()), " ", shape_string(stats.shape()));
}

template <class T>
void embedding_forward(const Tensor& table, std::span<const std::int32_t> ids, std::int64_t first_row, Tensor& out) {
  const std::int64_t cols = table.cols(), rows = table.rows();
  const T* src = table.data<T>();
  T* dst = out.data<T>();
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::int64_t r = ids[i] - first_row;
    T* row = dst + static_cast<std::int64_t>(i) * cols;
    if (r >= 0 && r < rows) std::memcpy(row, src + r * cols, static_cast<std::size_t>(cols) * sizeof(T));
    else std::fill_n(row, cols, T(0));
  }
}

template <class T>
void embedding_backward(const Tensor& dy, std::span<const std::int32_t> ids, std::int64_t first_row,
                        Tensor& table_grad) {
  const std::int64_t cols = table_grad.cols(), rows = table_grad.rows();
  const T* g = dy.data<T>();
  T* dst = table_grad.data<T>();
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::int64_t r = ids[i] - first_row;
    if (r < 0 || r >= rows) continue;
    const T* src = g + static_cast<std::int64_t>(i) * cols;
    for (std::int64_t j = 0; j < cols; ++j) dst[r * cols + j] += src[j];
  }
}

template <class T>
void attention_forward(const Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, Tensor& y, Tensor& probs) {
  const std::int64_t T_ = seq_len, C3 = qkv.cols(), C = C3 / 3, d = C / n_head;
  const std::int64_t sequences = qkv.rows() / T_;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const T* x = qkv.data<T>();
  T* out = y.data<T>();
  T* p = probs.data<T>();
  std::vector<double> score(static_cast<std::size_t>(T_)), acc(static_cast<std::size_t>(d));
  for (std::int64_t s = 0; s < sequences; ++s)
    for (std::int64_t h = 0; h < n_head; ++h) {
      T* ph = p + (s * n_head + h) * T_ * T_;
      for (std::int64_t i = 0; i < T_; ++i) {
        const T* q = x + at(s * T_ + i, C3, h * d);
        double mx = -std::numeric_limits<double>::infinity();
        for (std::int64_t j = 0; j <= i; ++j) {
          const T* k = x + at(s * T_ + j, C3, C + h * d);
          double dot = 0.0;
          for (std::int64_t e = 0; e < d; ++e) dot += static_cast<double>(q[e]) * k[e];
          score[static_cast<std::size_t>(j)] = dot * scale;
          mx = std::max(mx, dot * scale);
        }
        double sum = 0.0;
        for (std::int64_t j = 0; j <= i; ++j) sum += score[static_cast<std::size_t>(j)] = std::exp(score[static_cast<std::size_t>(j)] - mx);
        std::fill(acc.begin(), acc.end(), 0.0);
        for (std::int64_t j = 0; j < T_; ++j) {
          const double pij = j <= i ? score[static_cast<std::size_t>(j)] / sum : 0.0;
          ph[i * T_ + j] = static_cast<T>(pij);
          if (j > i) continue;
          const T* v = x + at(s * T_ + j, C3, 2 * C + h * d);
          for (std::int64_t e = 0; e < d; ++e) acc[static_cast<std::size_t>(e)] += pij * v[e];
        }
        for (std::int64_t e = 0; e < d; ++e) out[at(s * T_ + i, C, h * d + e)] = static_cast<T>(acc[static_cast<std::size_t>(e)]);
      }
    }
}

template <class T>
void attention_backward(const Tensor& dy, const Tensor& qkv, const Tensor& probs, std::int64_t seq_len,
                        std::int64_t n_head, Tensor& dqkv) {
  const std::int64_t T_ = seq_len, C3 = qkv.cols(), C = C3 / 3, d = C / n_head;
  const std::int64_t sequences = qkv.rows() / T_;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const T* x = qkv.data<T>();
  const T* g = dy.data<T>();
  const T* p = probs.data<T>();
  T* dx = dqkv.data<T>();
  std::fill_n(dx, dqkv.numel(), T(0));
  std::vector<double> dp(static_cast<std::size_t>(T_));
  for (std::int64_t s = 0; s < sequences; ++s)
    for (std::int64_t h = 0; h < n_head; ++h) {
      const T* ph = p + (s * n_head + h) * T_ * T_;
      for (std::int64_t i = 0; i < T_; ++i) {
        const T* gi = g + at(s * T_ + i, C, h * d);
        // dP_ij = dy_i · v_j and dV_j += P_ij dy_i; then the softmax Jacobian.
        double dot_pdp = 0.0;
        for (std::int64_t j = 0; j <= i; ++j) {
          const T* v = x + at(s * T_ + j, C3, 2 * C + h * d);
          T* dv = dx + at(s * T_ + j, C3, 2 * C + h * d);
          const double pij = ph[i * T_ + j];
          double acc = 0.0;
          for (std::int64_t e = 0; e < d; ++e) {
            acc += static_cast<double>(gi[e]) * v[e];
            dv[e] += static_cast<T>(pij * gi[e]);
          }
          dp[static_cast<std::size_t>(j)] = acc;
          dot_pdp += pij * acc;
        }
        const T* q = x + at(s * T_ + i, C3, h * d);
        T* dq = dx + at(s * T_ + i, C3, h * d);
        for (std::int64_t j = 0; j <= i; ++j) {
          const double ds = ph[i * T_ + j] * (dp[static_cast<std::size_t>(j)] - dot_pdp) * scale;
          const T* k = x + at(s * T_ + j, C3, C + h * d);
          T* dk = dx + at(s * T_ + j, C3, C + h * d);
          for (std::int64_t e = 0; e < d; ++e) {
            dq[e] += static_cast<T>(ds * k[e]);
            dk[e] += static_cast<T>(ds * q[e]);
          }
        }
      }
    }
}

template <class T>
void xent_row_max(const Tensor& logits, std::int64_t valid_cols, Tensor& row_max) {
  const std::int64_t cols = logits.cols();
  const T* l = logits.data<T>();
  double* mx = row_max.data<double>();
  for (std::int64_t i = 0; i < logits.rows(); ++i) {
    double m = -std::numeric_limits<double>::infinity();
    for (std::int64_t j = 0; j < valid_cols; ++j) m = std::max(m, static_cast<double>(l[at(i, cols, j)]));
    mx[i] = m;
  }
}

template <class T>
void xent_partial_sums(const Tensor& logits, std::int64_t valid_cols, const Tensor& row_max,
                       std::span<const std::int32_t> targets, std::int64_t col0, Tensor& sums) {
  const std::int64_t cols = logits.cols();
  const T* l = logits.data<T>();
  const double* mx = row_max.data<double>();
  double* out = sums.data<double>();
  for (std::int64_t i = 0; i < logits.rows(); ++i) {
    double s = 0.0;
    for (std::int64_t j = 0; j < valid_cols; ++j) s += std::exp(static_cast<double>(l[at(i, cols, j)]) - mx[i]);
    const std::int64_t t = targets[static_cast<std::size_t>(i)] - col0;
    out[2 * i] = s;
    out[2 * i + 1] = t >= 0 && t < valid_cols ? static_cast<double>(l[at(i, cols, t)]) : 0.0;
  }
}

template <class T>
void xent_backward(const Tensor& logits, std::int64_t valid_cols, const Tensor& lse,
                   std::span<const std::int32_t> targets, std::int64_t col0, double scale, Tensor& dlogits) {
  const std::int64_t cols = logits.cols();
  const T* l = logits.data<T>();
  const double* z = lse.data<double>();
  T* d = dlogits.data<T>();
  for (std::int64_t i = 0; i < logits.rows(); ++i) {
    const std::int64_t t = targets[static_cast<std::size_t>(i)] - col0;
    for (std::int64_t j = 0; j < cols; ++j) {
      double g = 0.0;
      if (j < valid_cols) g = std::exp(static_cast<double>(l[at(i, cols, j)]) - z[i]) - (j == t ? 1.0 : 0.0);
      d[at(i, cols, j)] = static_cast<T>(scale * g);
    }
  }
}

template <class T>
void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& st) {
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

#define MDTP_HOST_TRAIN_OPS(T)                                                                                    \
  template void embedding_forward<T>(const Tensor&, std::span<const std::int32_t>, std::int64_t, Tensor&);         \
  template void embedding_backward<T>(const Tensor&, std::span<const std::int32_t>, std::int64_t, Tensor&);        \
  template void attention_forward<T>(const Tensor&, std::int64_t, std::int64_t, Tensor&, Tensor&);                \
  template void attention_backward<T>(const Tensor&, const Tensor&, const Tensor&, std::int64_t, std::int64_t,    \
                                      Tensor&);                                                                   \
  template void xent_row_max<T>(const Tensor&, std::int64_t, Tensor&);                                            \
  template void xent_partial_sums<T>(const Tensor&, std::int64_t, const Tensor&, std::span<const std::int32_t>,   \
                                     std::int64_t, Tensor&);                                                      \
  template void xent_backward<T>(const Tensor&, std::int64_t, const Tensor&, std::span<const std::int32_t>,       \
                                 std::int64_t, double, Tensor&);                                                  \
  template void adamw_update<T>(Tensor&, const Tensor&, Tensor&, Tensor&, const AdamWStep&);
MDTP_HOST_TRAIN_OPS(float)
MDTP_HOST_TRAIN_OPS(double)
#undef MDTP_HOST_TRAIN_OPS

}  // namespace mdtp::host_ops
