// The host implementation of GptKernels: attention by GEMMs (model/host_attention.cpp), the
// cross-entropy's exps vectorised (core/vector_math.hpp) with f64 statistics, the embedding as row
// copies.  Arguments arrive validated by the GptKernels front.
#include "model/gpt_kernels.hpp"

#include "core/eigen_core.hpp"  // before the other headers: see there

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/vector_math.hpp"
#include "model/host_attention.hpp"

namespace mdtp {
namespace {

template <class T>
using Row = Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>>;
template <class T>
using ConstRow = Eigen::Map<const Eigen::Array<T, 1, Eigen::Dynamic>>;

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
void host_xent_row_max(const Tensor& logits, std::int64_t valid_cols, Tensor& row_max) {
  const std::int64_t cols = logits.cols();
  double* mx = row_max.data<double>();
  for (std::int64_t i = 0; i < logits.rows(); ++i)
    mx[i] = valid_cols == 0 ? -std::numeric_limits<double>::infinity()
                            : static_cast<double>(ConstRow<T>(logits.data<T>() + i * cols, valid_cols).maxCoeff());
}

// Σ_valid exp(logit - max) in f64 from exps computed in T (vectorised), and the target's logit.
template <class T>
void host_xent_partial_sums(const Tensor& logits, std::int64_t valid_cols, const Tensor& row_max,
                            std::span<const std::int32_t> targets, std::int64_t col0, Tensor& sums) {
  const std::int64_t cols = logits.cols();
  const T* l = logits.data<T>();
  const double* mx = row_max.data<double>();
  double* out = sums.data<double>();
  // Eigen's own (aligned) storage: its vectorised sum peels elements up to the first aligned
  // address, so a buffer whose alignment varied from run to run (std::vector's) would vary the
  // summation order and break bitwise reproducibility.
  Eigen::Array<T, 1, Eigen::Dynamic> e(valid_cols);
  for (std::int64_t i = 0; i < logits.rows(); ++i) {
    Row<T> ei(e.data(), valid_cols);
    ei = ConstRow<T>(l + i * cols, valid_cols) - static_cast<T>(mx[i]);
    array_exp(e.data(), e.data(), valid_cols);
    const std::int64_t t = targets[static_cast<std::size_t>(i)] - col0;
    out[2 * i] = valid_cols == 0 ? 0.0 : ei.template cast<double>().sum();
    out[2 * i + 1] = t >= 0 && t < valid_cols ? static_cast<double>(l[at(i, cols, t)]) : 0.0;
  }
}

// The exponent logit - lse is formed in f64 (lse is f64 and need not be a T), then rounded to T.
template <class T>
void host_xent_backward(const Tensor& logits, std::int64_t valid_cols, const Tensor& lse,
                        std::span<const std::int32_t> targets, std::int64_t col0, double scale, Tensor& dlogits) {
  const std::int64_t cols = logits.cols();
  const T* l = logits.data<T>();
  const double* z = lse.data<double>();
  T* d = dlogits.data<T>();
  for (std::int64_t i = 0; i < logits.rows(); ++i) {
    T* row = d + i * cols;
    Row<T> g(row, valid_cols);
    g = (ConstRow<T>(l + i * cols, valid_cols).template cast<double>() - z[i]).template cast<T>();
    array_exp(row, row, valid_cols);
    const std::int64_t t = targets[static_cast<std::size_t>(i)] - col0;
    if (t >= 0 && t < valid_cols) row[t] -= T(1);
    g *= static_cast<T>(scale);
    std::fill(row + valid_cols, row + cols, T(0));
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
    const std::int64_t block = std::min(kAttentionBlock, seq_len);
    Tensor scratch = backend().empty({block, seq_len}, qkv.dtype(), MemCategory::workspace);
    dispatch(qkv.dtype(), [&](auto zero) {
      host_attention_backward<decltype(zero)>(dy, qkv, probs, seq_len, n_head, dqkv, scratch);
    });
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
