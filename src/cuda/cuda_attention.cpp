// CudaGptKernels' causal multi-head attention: strided-batched cuBLAS GEMMs over the heads of one
// sequence at a time (Q, K, V of head h are column blocks of qkv, so heads are `d` elements apart
// and rows 3C apart), and the row softmax kernels in between.  Same maths as the host
// (model/host_gpt_kernels.cpp); probs keeps the masked softmax for backward.
//
//   forward:  P_h = softmax_causal(Q_h K_hᵀ / sqrt(d));  Y_h = P_h V_h
//   backward: dV_h = P_hᵀ dY_h;  dP_h = dY_h V_hᵀ;  dS_h = P_h ∘ (dP_h - rowsum(P_h ∘ dP_h)) / sqrt(d);
//             dQ_h = dS_h K_h;   dK_h = dS_hᵀ Q_h
#include <cmath>

#include "cuda/cuda_gpt_kernels.hpp"
#include "cuda/cuda_gemm.hpp"
#include "cuda/cuda_kernels.hpp"

namespace mdtp {
namespace {

struct AttentionLayout {
  std::int64_t T, C3, C, d, heads, sequences;
  std::size_t es;  // element size
  double scale;    // 1 / sqrt(d)
  AttentionLayout(const Tensor& qkv, std::int64_t seq_len, std::int64_t n_head)
      : T(seq_len), C3(qkv.cols()), C(C3 / 3), d(C / n_head), heads(n_head), sequences(qkv.rows() / seq_len),
        es(dtype_size(qkv.dtype())), scale(1.0 / std::sqrt(static_cast<double>(C / n_head))) {}
  // Byte offset of column `col` of row `row` in a matrix with `cols` columns.
  std::size_t at(std::int64_t row, std::int64_t cols, std::int64_t col) const {
    return static_cast<std::size_t>(row * cols + col) * es;
  }
};

const char* bytes(const Tensor& t) { return static_cast<const char*>(t.raw_data()); }
char* bytes(Tensor& t) { return static_cast<char*>(t.raw_data()); }

}  // namespace

// The strided batches below step from head to head by d in Q, K and V alike: one K/V head per
// query head.
static void require_one_kv_per_head(const Tensor& qkv, const Tensor& y) {
  require(qkv.cols() == 3 * y.cols(), "CUDA attention: grouped-query attention (qkv ", qkv.cols(),
          " columns for an output of ", y.cols(), ") is not implemented on CUDA yet; it runs on the host");
}

void CudaGptKernels::do_attention_forward(const Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, Tensor& y,
                                    Tensor& probs) const {
  require_one_kv_per_head(qkv, y);
  const AttentionLayout L(qkv, seq_len, n_head);
  if (L.sequences == 0 || L.d == 0) return;
  const DType dt = qkv.dtype();
  const std::int64_t TT = L.T * L.T;
  for (std::int64_t s = 0; s < L.sequences; ++s) {
    const char* q = bytes(qkv) + L.at(s * L.T, L.C3, 0);
    char* p = bytes(probs) + static_cast<std::size_t>(s * L.heads * TT) * L.es;
    gemm_rowmajor(cuda_.cublas(), dt, cuda_.allow_tf32(), false, true, L.T, L.T, L.d, L.scale, {q, L.C3, L.d},
                  {q + L.at(0, L.C3, L.C), L.C3, L.d}, 0.0, p, L.T, TT, L.heads);
  }
  kernels::softmax_rows(dt, probs.raw_data(), probs.raw_data(), L.sequences * L.heads * L.T, L.T, L.T, cuda_.stream());
  for (std::int64_t s = 0; s < L.sequences; ++s) {
    const char* v = bytes(qkv) + L.at(s * L.T, L.C3, 2 * L.C);
    const char* p = bytes(probs) + static_cast<std::size_t>(s * L.heads * TT) * L.es;
    gemm_rowmajor(cuda_.cublas(), dt, cuda_.allow_tf32(), false, false, L.T, L.d, L.T, 1.0, {p, L.T, TT}, {v, L.C3, L.d}, 0.0,
                  bytes(y) + L.at(s * L.T, L.C, 0), L.C, L.d, L.heads);
  }
}

void CudaGptKernels::do_attention_backward(const Tensor& dy, const Tensor& qkv, const Tensor& probs, std::int64_t seq_len,
                                     std::int64_t n_head, Tensor& dqkv) const {
  require_one_kv_per_head(qkv, dy);
  const AttentionLayout L(qkv, seq_len, n_head);
  if (L.sequences == 0 || L.d == 0) return;
  const DType dt = qkv.dtype();
  const std::int64_t TT = L.T * L.T;
  // dP / dS of one sequence's heads; reused sequence after sequence (stream order).
  Tensor dp = cuda_.empty({L.heads, L.T, L.T}, dt, MemCategory::workspace);
  char* dps = bytes(dp);
  for (std::int64_t s = 0; s < L.sequences; ++s) {
    const char* x = bytes(qkv) + L.at(s * L.T, L.C3, 0);
    const char *q = x, *k = x + L.at(0, L.C3, L.C), *v = x + L.at(0, L.C3, 2 * L.C);
    char* dx = bytes(dqkv) + L.at(s * L.T, L.C3, 0);
    char *dq = dx, *dk = dx + L.at(0, L.C3, L.C), *dv = dx + L.at(0, L.C3, 2 * L.C);
    const char* g = bytes(dy) + L.at(s * L.T, L.C, 0);
    const char* p = bytes(probs) + static_cast<std::size_t>(s * L.heads * TT) * L.es;
    const bool tf32 = cuda_.allow_tf32();
    gemm_rowmajor(cuda_.cublas(), dt, tf32, true, false, L.T, L.d, L.T, 1.0, {p, L.T, TT}, {g, L.C, L.d}, 0.0, dv, L.C3,
                  L.d, L.heads);
    gemm_rowmajor(cuda_.cublas(), dt, tf32, false, true, L.T, L.T, L.d, 1.0, {g, L.C, L.d}, {v, L.C3, L.d}, 0.0, dps, L.T,
                  TT, L.heads);
    kernels::softmax_rows_backward(dt, p, dps, dps, L.heads * L.T, L.T, L.scale, cuda_.stream());
    gemm_rowmajor(cuda_.cublas(), dt, tf32, false, false, L.T, L.d, L.T, 1.0, {dps, L.T, TT}, {k, L.C3, L.d}, 0.0, dq, L.C3,
                  L.d, L.heads);
    gemm_rowmajor(cuda_.cublas(), dt, tf32, true, false, L.T, L.d, L.T, 1.0, {dps, L.T, TT}, {q, L.C3, L.d}, 0.0, dk, L.C3,
                  L.d, L.heads);
  }
}

}  // namespace mdtp
