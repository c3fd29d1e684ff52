// Kernels of the Backend's training ops that are not GEMMs: embedding lookup and gradient,
// and the vocabulary-parallel cross-entropy pieces.  They mirror model/host_gpt_kernels.cpp: statistics
// and cross-entropy arithmetic in double whatever the dtype, the embedding gradient summed per
// table row in token order (deterministic, no atomics).
#include <cmath>

#include "cuda/cuda_kernels.hpp"
#include "cuda/kernel_support.cuh"

namespace mdtp::kernels {
namespace {

template <class T>
__global__ void embedding_forward_kernel(const T* table, std::int64_t table_rows, std::int64_t cols,
                                         const std::int32_t* ids, std::int64_t n, std::int64_t first_row, T* out) {
  for (std::int64_t k = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; k < n * cols;
       k += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t i = k / cols, j = k % cols;
    const std::int64_t r = ids[i] - first_row;
    out[k] = r >= 0 && r < table_rows ? table[r * cols + j] : cast_to<T>(0.0f);
  }
}

// Block (u, column chunk): the tokens of unique row u, in order, added to that row.  Column
// chunks run along y, whose grid limit (65535) a wide enough row would pass: blocks stride.
// The gradient G is T, or f32 for 16-bit dy (gradients kept in f32).
template <class T, class G>
__global__ void embedding_backward_kernel(const T* dy, std::int64_t cols, const std::int32_t* rows,
                                          const std::int32_t* offsets, const std::int32_t* tokens, G* grad) {
  const std::int64_t u = blockIdx.x;
  for (std::int64_t j = blockIdx.y * std::int64_t{blockDim.x} + threadIdx.x; j < cols;
       j += std::int64_t{gridDim.y} * blockDim.x) {
    G* dst = grad + rows[u] * cols + j;
    Acc<G> acc = load(dst, 0);
    for (std::int32_t k = offsets[u]; k < offsets[u + 1]; ++k) acc += static_cast<Acc<G>>(load(dy, tokens[k] * cols + j));
    *dst = cast_to<G>(acc);
  }
}

template <class T>
__global__ void xent_row_max_kernel(const T* logits, std::int64_t cols, std::int64_t valid_cols, double* row_max) {
  __shared__ double scratch[32];
  const std::int64_t base = blockIdx.x * cols;
  double m = -INFINITY;
  row_batched<double>(valid_cols, [&](std::int64_t j) { return static_cast<double>(load(logits, base + j)); },
                      [&](std::int64_t, double v) { m = fmax(m, v); });
  m = block_reduce(m, MaxOp{}, -static_cast<double>(INFINITY), scratch);
  if (threadIdx.x == 0) row_max[blockIdx.x] = m;
}

template <class T>
__global__ void xent_partial_sums_kernel(const T* logits, std::int64_t cols, std::int64_t valid_cols,
                                         const double* row_max, const std::int32_t* targets, std::int64_t col0,
                                         double* sums) {
  __shared__ double scratch[32];
  const std::int64_t row = blockIdx.x, base = row * cols;
  const double mx = row_max[row];
  double s = 0.0;
  row_batched<double>(valid_cols, [&](std::int64_t j) { return static_cast<double>(load(logits, base + j)); },
                      [&](std::int64_t, double v) { s += exp(v - mx); });
  s = block_reduce(s, SumOp{}, 0.0, scratch);
  if (threadIdx.x == 0) {
    const std::int64_t t = targets ? targets[row] - col0 : -1;
    sums[2 * row] = s;
    sums[2 * row + 1] = t >= 0 && t < valid_cols ? static_cast<double>(load(logits, base + t)) : 0.0;
  }
}

template <class T>
__global__ void xent_backward_kernel(const T* logits, std::int64_t rows, std::int64_t cols, std::int64_t valid_cols,
                                     const double* lse, const std::int32_t* targets, std::int64_t col0, double scale,
                                     T* dlogits) {
  // A block per row: the row's target and log-sum-exp read once, no division per element.
  for (std::int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
    const std::int64_t t = targets ? targets[i] - col0 : -1;
    const double row_lse = lse[i];
    const std::int64_t base = i * cols;
    row_batched<T>(cols,
        [&](std::int64_t j) {
          double g = 0.0;
          if (j < valid_cols) g = exp(static_cast<double>(load(logits, base + j)) - row_lse) - (j == t ? 1.0 : 0.0);
          return cast_to<T>(scale * g);
        },
        [&](std::int64_t j, T v) { dlogits[base + j] = v; });  // may alias logits: each round reads first
  }
}

}  // namespace

void embedding_forward(DType type, const void* table, std::int64_t table_rows, std::int64_t cols,
                       const std::int32_t* ids, std::int64_t n, std::int64_t first_row, void* out,
                       cudaStream_t stream) {
  if (n * cols == 0) return;
  MDTP_DISPATCH_DTYPE(type, T,
    embedding_forward_kernel<T><<<grid_for(n * cols), kThreads, 0, stream>>>(
        static_cast<const T*>(table), table_rows, cols, ids, n, first_row, static_cast<T*>(out)));
  MDTP_CHECK_LAUNCH();
}

void embedding_backward(DType type, const void* dy, std::int64_t cols, const std::int32_t* rows,
                        const std::int32_t* offsets, const std::int32_t* tokens, std::int64_t unique_rows,
                        DType grad_type, void* table_grad, cudaStream_t stream) {
  if (unique_rows == 0 || cols == 0) return;
  const dim3 grid(grid_x(unique_rows), grid_y((cols + kThreads - 1) / kThreads));
  MDTP_DISPATCH_ACCUMULATOR(type, grad_type, T, G,
    embedding_backward_kernel<T, G><<<grid, kThreads, 0, stream>>>(
        static_cast<const T*>(dy), cols, rows, offsets, tokens, static_cast<G*>(table_grad)));
  MDTP_CHECK_LAUNCH();
}

void xent_row_max(DType type, const void* logits, std::int64_t rows, std::int64_t cols, std::int64_t valid_cols,
                  double* row_max, cudaStream_t stream) {
  if (rows == 0) return;
  MDTP_DISPATCH_DTYPE(type, T,
    xent_row_max_kernel<T><<<grid_x(rows), kThreads, 0, stream>>>(static_cast<const T*>(logits), cols,
                                                                       valid_cols, row_max));
  MDTP_CHECK_LAUNCH();
}

void xent_partial_sums(DType type, const void* logits, std::int64_t rows, std::int64_t cols,
                       std::int64_t valid_cols, const double* row_max, const std::int32_t* targets,
                       std::int64_t col0, double* sums, cudaStream_t stream) {
  if (rows == 0) return;
  MDTP_DISPATCH_DTYPE(type, T,
    xent_partial_sums_kernel<T><<<grid_x(rows), kThreads, 0, stream>>>(
        static_cast<const T*>(logits), cols, valid_cols, row_max, targets, col0, sums));
  MDTP_CHECK_LAUNCH();
}

void xent_backward(DType type, const void* logits, std::int64_t rows, std::int64_t cols,
                   std::int64_t valid_cols, const double* lse, const std::int32_t* targets,
                   std::int64_t col0, double scale, void* dlogits, cudaStream_t stream) {
  if (rows * cols == 0) return;
  MDTP_DISPATCH_DTYPE(type, T,
    xent_backward_kernel<T><<<grid_rows(rows), kThreads, 0, stream>>>(
        static_cast<const T*>(logits), rows, cols, valid_cols, lse, targets, col0, scale, static_cast<T*>(dlogits)));
  MDTP_CHECK_LAUNCH();
}

}  // namespace mdtp::kernels
