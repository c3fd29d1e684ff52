// The host implementation of GptKernels: plain loops per (sequence, head) with float64
// accumulation.  Arguments arrive validated by the GptKernels front.
#include "model/gpt_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace mdtp {
namespace {

std::size_t at(std::int64_t row, std::int64_t cols, std::int64_t col) {
  return static_cast<std::size_t>(row * cols + col);
}

template <class T>
void host_embedding_forward(const Tensor& table, std::span<const std::int32_t> ids, std::int64_t first_row, Tensor& out) {
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
void host_embedding_backward(const Tensor& dy, std::span<const std::int32_t> ids, std::int64_t first_row,
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
void host_attention_forward(const Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, Tensor& y, Tensor& probs) {
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
void host_attention_backward(const Tensor& dy, const Tensor& qkv, const Tensor& probs, std::int64_t seq_len,
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
void host_xent_row_max(const Tensor& logits, std::int64_t valid_cols, Tensor& row_max) {
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
void host_xent_partial_sums(const Tensor& logits, std::int64_t valid_cols, const Tensor& row_max,
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
void host_xent_backward(const Tensor& logits, std::int64_t valid_cols, const Tensor& lse,
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

// One dispatch on the element type per op; the front has already refused other dtypes.
template <class Fn>
void dispatch(DType dtype, Fn&& fn) {
  if (dtype == DType::f32) fn(float{});
  else fn(double{});
}

class HostGptKernels final : public GptKernels {
 public:
  using GptKernels::GptKernels;

 protected:
  void do_embedding_forward(const Tensor& table, std::span<const std::int32_t> ids, std::int64_t first_row,
                            Tensor& out) const override {
    dispatch(table.dtype(), [&](auto zero) { host_embedding_forward<decltype(zero)>(table, ids, first_row, out); });
  }
  void do_embedding_backward(const Tensor& dy, std::span<const std::int32_t> ids, std::int64_t first_row,
                             Tensor& table_grad) const override {
    dispatch(dy.dtype(), [&](auto zero) { host_embedding_backward<decltype(zero)>(dy, ids, first_row, table_grad); });
  }
  void do_attention_forward(const Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, Tensor& y,
                            Tensor& probs) const override {
    dispatch(qkv.dtype(), [&](auto zero) { host_attention_forward<decltype(zero)>(qkv, seq_len, n_head, y, probs); });
  }
  void do_attention_backward(const Tensor& dy, const Tensor& qkv, const Tensor& probs, std::int64_t seq_len,
                             std::int64_t n_head, Tensor& dqkv) const override {
    dispatch(qkv.dtype(),
             [&](auto zero) { host_attention_backward<decltype(zero)>(dy, qkv, probs, seq_len, n_head, dqkv); });
  }
  void do_xent_row_max(const Tensor& logits, std::int64_t valid_cols, Tensor& row_max) const override {
    dispatch(logits.dtype(), [&](auto zero) { host_xent_row_max<decltype(zero)>(logits, valid_cols, row_max); });
  }
  void do_xent_partial_sums(const Tensor& logits, std::int64_t valid_cols, const Tensor& row_max,
                            std::span<const std::int32_t> targets, std::int64_t col0, Tensor& sums) const override {
    dispatch(logits.dtype(), [&](auto zero) {
      host_xent_partial_sums<decltype(zero)>(logits, valid_cols, row_max, targets, col0, sums);
    });
  }
  void do_xent_backward(const Tensor& logits, std::int64_t valid_cols, const Tensor& lse,
                        std::span<const std::int32_t> targets, std::int64_t col0, double scale,
                        Tensor& dlogits) const override {
    dispatch(logits.dtype(), [&](auto zero) {
      host_xent_backward<decltype(zero)>(logits, valid_cols, lse, targets, col0, scale, dlogits);
    });
  }
};

}  // namespace

std::unique_ptr<GptKernels> make_host_gpt_kernels(const Backend& backend) {
  require(backend.device() == DeviceKind::host, "the host GPT kernels need a host backend; got ", backend.name());
  return std::make_unique<HostGptKernels>(backend);
}

}  // namespace mdtp
