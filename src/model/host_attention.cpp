#include "model/host_attention.hpp"

#include "core/eigen_core.hpp"  // before the other headers: see there

#include <algorithm>
#include <cmath>

#include "core/host_gemm.hpp"
#include "core/vector_math.hpp"

namespace mdtp {
namespace {

template <class T>
using RowMap = Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>>;
template <class T>
using ConstRowMap = Eigen::Map<const Eigen::Array<T, 1, Eigen::Dynamic>>;

// Where one head of one sequence lives: Q, K, V (and their gradients) are d-wide column blocks of
// [T, C + 2·C_kv] rows; Y and dY d-wide blocks of [T, C] rows; P is a contiguous T x T matrix.
// Query head h reads K/V head h / group (group = heads / kv_heads; 1 without grouped queries).
struct HeadView {
  std::int64_t T, C, d;
  std::int64_t q, k, v;  // element offsets of Q, K, V of the head in the sequence's qkv rows
  std::int64_t y;        // element offset of the head in the sequence's y rows
  HeadView(const Tensor& qkv, std::int64_t q_width, std::int64_t seq_len, std::int64_t n_head, std::int64_t h)
      : T(seq_len), C(q_width), d(q_width / n_head), q(h * d), k(0), v(0), y(h * d) {
    const std::int64_t kv_width = (qkv.cols() - C) / 2, group = n_head / (kv_width / d), kv = h / group;
    k = C + kv * d;
    v = C + kv_width + kv * d;
  }
};

// Row i of a block of scores over keys [0, i], in place: exp(s - max) / Σ; keys after i (the causal
// mask) are set to 0 through the end of the T-wide row.
template <class T>
void causal_softmax_row(T* row, std::int64_t i, std::int64_t T_) {
  RowMap<T> s(row, i + 1);
  s -= s.maxCoeff();
  array_exp(row, row, i + 1);
  s *= T(1) / s.sum();
  std::fill(row + i + 1, row + T_, T(0));
}

}  // namespace

template <class T>
void host_attention_forward(const Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, Tensor& y, Tensor& probs) {
  const std::int64_t sequences = qkv.rows() / seq_len, C3 = qkv.cols(), C = y.cols();
  if (sequences == 0 || C == 0) return;
  for (std::int64_t s = 0; s < sequences; ++s)
    for (std::int64_t h = 0; h < n_head; ++h) {
      const HeadView hv(qkv, C, seq_len, n_head, h);
      const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hv.d)));
      const T* x = qkv.data<T>() + s * seq_len * C3;
      T* p = probs.data<T>() + (s * n_head + h) * seq_len * seq_len;
      T* out = y.data<T>() + s * seq_len * C + hv.y;
      for (std::int64_t i0 = 0; i0 < seq_len; i0 += kAttentionBlock) {
        const std::int64_t i1 = std::min(seq_len, i0 + kAttentionBlock), rows = i1 - i0;
        T* pb = p + i0 * seq_len;
        host_gemm<T>(false, true, rows, i1, hv.d, scale, x + i0 * C3 + hv.q, C3, x + hv.k, C3, T(0), pb, seq_len);
        for (std::int64_t r = 0; r < rows; ++r) causal_softmax_row(pb + r * seq_len, i0 + r, seq_len);
        host_gemm<T>(false, false, rows, hv.d, i1, T(1), pb, seq_len, x + hv.v, C3, T(0), out + i0 * C, C);
      }
    }
}

template <class T>
void host_attention_backward(const Tensor& dy, const Tensor& qkv, const Tensor& probs, std::int64_t seq_len,
                             std::int64_t n_head, Tensor& dqkv, Tensor& scratch) {
  const std::int64_t sequences = qkv.rows() / seq_len, C3 = qkv.cols(), C = dy.cols();
  // dK and dV accumulate over the query blocks (and over the query heads that share them); dQ is
  // written whole, block by block.
  std::fill_n(dqkv.data<T>(), dqkv.numel(), T(0));
  if (sequences == 0 || C == 0) return;
  T* ds = scratch.data<T>();
  for (std::int64_t s = 0; s < sequences; ++s)
    for (std::int64_t h = 0; h < n_head; ++h) {
      const HeadView hv(qkv, C, seq_len, n_head, h);
      const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hv.d)));
      const T* x = qkv.data<T>() + s * seq_len * C3;
      T* dx = dqkv.data<T>() + s * seq_len * C3;
      const T* g = dy.data<T>() + s * seq_len * C + hv.y;
      const T* p = probs.data<T>() + (s * n_head + h) * seq_len * seq_len;
      for (std::int64_t i0 = 0; i0 < seq_len; i0 += kAttentionBlock) {
        const std::int64_t i1 = std::min(seq_len, i0 + kAttentionBlock), rows = i1 - i0;
        const T* pb = p + i0 * seq_len;
        const T* gb = g + i0 * C;
        host_gemm<T>(true, false, i1, hv.d, rows, T(1), pb, seq_len, gb, C, T(1), dx + hv.v, C3);
        host_gemm<T>(false, true, rows, i1, hv.d, T(1), gb, C, x + hv.v, C3, T(0), ds, i1);
        for (std::int64_t r = 0; r < rows; ++r) {
          const std::int64_t keys = i0 + r + 1;  // the causal row: keys [0, i]
          RowMap<T> dsr(ds + r * i1, keys);
          const ConstRowMap<T> pr(pb + r * seq_len, keys);
          dsr = pr * (dsr - (pr * dsr).sum()) * scale;
          std::fill(ds + r * i1 + keys, ds + (r + 1) * i1, T(0));
        }
        host_gemm<T>(false, false, rows, hv.d, i1, T(1), ds, i1, x + hv.k, C3, T(0), dx + i0 * C3 + hv.q, C3);
        host_gemm<T>(true, false, i1, hv.d, rows, T(1), ds, i1, x + i0 * C3 + hv.q, C3, T(1), dx + hv.k, C3);
      }
    }
}

template void host_attention_forward<float>(const Tensor&, std::int64_t, std::int64_t, Tensor&, Tensor&);
template void host_attention_forward<double>(const Tensor&, std::int64_t, std::int64_t, Tensor&, Tensor&);
template void host_attention_backward<float>(const Tensor&, const Tensor&, const Tensor&, std::int64_t, std::int64_t,
                                             Tensor&, Tensor&);
template void host_attention_backward<double>(const Tensor&, const Tensor&, const Tensor&, std::int64_t,
                                              std::int64_t, Tensor&, Tensor&);

}  // namespace mdtp
