// Kernels behind CudaBackend.  Each mirrors the host backend's arithmetic (host_backend.cpp):
// the same formulas, f32 math in float, f64 math in double, LayerNorm statistics in double, so
// the two backends agree to rounding.  Elementwise kernels use grid-stride loops; row
// statistics a warp per row; column sums two passes (32 columns by a chunk of rows per block, then
// the chunks in order).
#include "cuda/cuda_kernels.hpp"
#include "cuda/kernel_support.cuh"

namespace mdtp::kernels {
namespace {

constexpr double kGeluC = 0.7978845608028654;  // sqrt(2/pi), as on the host

#define MDTP_GRID_STRIDE(i, n) \
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < (n); i += std::int64_t{gridDim.x} * blockDim.x)

template <class T>
__global__ void fill_kernel(T* x, std::int64_t n, T value) {
  grid_batched<T>(n, [&](std::int64_t) { return value; }, [&](std::int64_t i, T v) { x[i] = v; });
}

template <class S, class D>
__global__ void convert_kernel(const S* src, D* dst, std::int64_t n) {
  // Through the wider accumulation type: exact for every widening, one rounding when narrowing.
  grid_batched<D>(n, [&](std::int64_t i) { return cast_to<D>(static_cast<double>(load(src, i))); },
                  [&](std::int64_t i, D v) { dst[i] = v; });
}

template <class T, class G>
__global__ void axpy_kernel(Acc<G> alpha, const T* x, G* y, std::int64_t n) {
  grid_batched<G>(n, [&](std::int64_t i) { return cast_to<G>(load(y, i) + alpha * static_cast<Acc<G>>(load(x, i))); },
                  [&](std::int64_t i, G v) { y[i] = v; });
}

template <class T>
__global__ void scale_kernel(T* x, std::int64_t n, Acc<T> alpha) {
  MDTP_GRID_STRIDE(i, n) x[i] = cast_to<T>(load(x, i) * alpha);
}

// Row-wise kernels walk a block per row and a thread per column: the element's row and column come
// from the loops, not from a 64-bit division and remainder per element, which cost these kernels
// more than their memory traffic.
template <class T>
__global__ void add_row_vector_kernel(T* y, const T* row, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
    T* yr = y + i * cols;
    row_batched<T>(cols, [&](std::int64_t j) { return cast_to<T>(load(yr, j) + load(row, j)); },
                   [&](std::int64_t j, T v) { yr[j] = v; });
  }
}

// Column reductions (bias gradients, LayerNorm's dγ and dβ), pass 1: block (column block, chunk)
// covers 32 columns (threadIdx.x) of one chunk of rows with kColumnRows row lanes (threadIdx.y),
// then sums its lanes in a fixed order into partial[chunk][column].  With x̂ given, it also sums
// dy·x̂ into the second half of the workspace.  One block per 32 columns over all rows (as before)
// left most of the GPU idle at a transformer's widths: 32 blocks for 1024 columns.
constexpr int kColumnRows = 16;
constexpr std::int64_t kColumnChunkRows = 256;  // rows per chunk, at least
constexpr std::int64_t kColumnBlocks = 1024;    // blocks pass 1 aims at

std::int64_t chunk_count(std::int64_t rows, std::int64_t cols) {
  const std::int64_t column_blocks = (cols + 31) / 32;
  return std::clamp<std::int64_t>(std::min(rows / kColumnChunkRows, kColumnBlocks / std::max<std::int64_t>(column_blocks, 1)),
                                  1, kMaxGridY);
}

template <class T>
__global__ void column_partials_kernel(const T* x, const T* xhat, Acc<T>* partial, std::int64_t rows,
                                       std::int64_t cols, std::int64_t chunk_rows, std::int64_t chunks) {
  using A = Acc<T>;
  __shared__ A lanes[kColumnRows][33];
  __shared__ A lanes_xhat[kColumnRows][33];
  const std::int64_t col = blockIdx.x * std::int64_t{32} + threadIdx.x;
  const std::int64_t r0 = blockIdx.y * chunk_rows, r1 = min(rows, r0 + chunk_rows);
  A s = 0, sx = 0;
  if (col < cols)
    for (std::int64_t r = r0 + threadIdx.y; r < r1; r += kColumnRows) {
      const A d = load(x, r * cols + col);
      s += d;
      if (xhat) sx += d * load(xhat, r * cols + col);
    }
  lanes[threadIdx.y][threadIdx.x] = s;
  lanes_xhat[threadIdx.y][threadIdx.x] = sx;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    A total = 0, total_xhat = 0;
    for (int k = 0; k < kColumnRows; ++k) {
      total += lanes[k][threadIdx.x];
      total_xhat += lanes_xhat[k][threadIdx.x];
    }
    partial[blockIdx.y * cols + col] = total;
    if (xhat) partial[(chunks + blockIdx.y) * cols + col] = total_xhat;
  }
}

// Pass 2: out = beta·out + the chunks' sums, in chunk order; with out_xhat, out_xhat += the dy·x̂
// sums (LayerNorm's dγ; out is then dβ, beta 1).
template <class T, class G>
__global__ void column_finish_kernel(const Acc<T>* partial, std::int64_t chunks, std::int64_t cols, G* out,
                                     Acc<T> beta, G* out_xhat) {
  using A = Acc<T>;
  MDTP_GRID_STRIDE(col, cols) {
    A total = 0;
    for (std::int64_t c = 0; c < chunks; ++c) total += partial[c * cols + col];
    // beta == 0 overwrites, so an uninitialised `out` (even NaN) is fine, as on the host.
    const A base = beta == A(0) ? A(0) : beta * static_cast<A>(load(out, col));
    out[col] = cast_to<G>(base + total);
    if (out_xhat) {
      A total_xhat = 0;
      for (std::int64_t c = 0; c < chunks; ++c) total_xhat += partial[(chunks + c) * cols + col];
      out_xhat[col] = cast_to<G>(static_cast<A>(load(out_xhat, col)) + total_xhat);
    }
  }
}

template <class T, class G>
void launch_column_reduction(const T* x, const T* xhat, G* out, G* out_xhat, Acc<T> beta, std::int64_t rows,
                             std::int64_t cols, void* workspace, cudaStream_t stream) {
  const std::int64_t chunks = chunk_count(rows, cols), chunk_rows = (rows + chunks - 1) / chunks;
  auto* partial = static_cast<Acc<T>*>(workspace);
  column_partials_kernel<T><<<dim3(grid_x((cols + 31) / 32), static_cast<unsigned>(chunks)), dim3(32, kColumnRows), 0,
                              stream>>>(x, xhat, partial, rows, cols, chunk_rows, chunks);
  MDTP_CHECK_LAUNCH();
  column_finish_kernel<T, G><<<grid_for(cols), kThreads, 0, stream>>>(partial, chunks, cols, out, beta, out_xhat);
  MDTP_CHECK_LAUNCH();
}

template <class T>
__global__ void sum_squares_kernel(const T* x, std::int64_t n, double* partials) {
  __shared__ double scratch[32];
  double s = 0.0;
  MDTP_GRID_STRIDE(i, n) {
    double v = static_cast<double>(load(x, i));
    s += v * v;
  }
  s = block_reduce(s, SumOp{}, 0.0, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

__global__ void sum_partials_kernel(double* partials, int parts) {
  __shared__ double scratch[32];
  double s = 0.0;
  for (int i = threadIdx.x; i < parts; i += blockDim.x) s += partials[i];
  s = block_reduce(s, SumOp{}, 0.0, scratch);
  if (threadIdx.x == 0) partials[kReduceParts] = s;
}

template <class T>
__global__ void gelu_forward_kernel(const T* x, T* y, std::int64_t n) {
  using A = Acc<T>;
  grid_batched<T>(n,
      [&](std::int64_t i) {
        A v = load(x, i);
        return cast_to<T>(A(0.5) * v * (A(1) + tanh(A(kGeluC) * (v + A(0.044715) * v * v * v))));
      },
      [&](std::int64_t i, T v) { y[i] = v; });
}

template <class T>
__global__ void gelu_backward_kernel(const T* x, const T* dy, T* dx, std::int64_t n) {
  using A = Acc<T>;
  grid_batched<T>(n,
      [&](std::int64_t i) {
        A v = load(x, i);
        A u = A(kGeluC) * (v + A(0.044715) * v * v * v);
        A th = tanh(u);
        A du = A(kGeluC) * (A(1) + A(3 * 0.044715) * v * v);
        return cast_to<T>(load(dy, i) * (A(0.5) * (A(1) + th) + A(0.5) * v * (A(1) - th * th) * du));
      },
      [&](std::int64_t i, T v) { dx[i] = v; });
}

// LayerNorm's row statistics take a warp per row, kStatRows rows per block: the reductions are
// shuffles with no block barrier.  On an H200 this took LayerNorm forward from 0.19 to 0.22 of a
// device copy's rate at hidden 1024 (bench_kernels_cuda): what is left is its three launches
// (statistics, merge, apply) and the f64 arithmetic, not the reductions.
constexpr int kStatRows = kThreads / 32;

// Two passes (mean, then squared deviations), as on the host: no cancellation in M2.  The second
// pass reads the row again from cache.
template <class T>
__global__ void row_mean_m2_kernel(const T* x, double* stats, std::int64_t rows, std::int64_t cols) {
  const std::int64_t r = warp_row<kStatRows>();
  if (r >= rows) return;  // the whole warp: the shuffles below see every lane
  const int lane = threadIdx.x & 31;
  const T* row = x + r * cols;
  double s = 0.0;
  strided_batched<double>(lane, 32, cols, [&](std::int64_t j) { return static_cast<double>(load(row, j)); },
                          [&](std::int64_t, double v) { s += v; });
  s = warp_reduce(s, SumOp{});
  const double mean = cols ? s / static_cast<double>(cols) : 0.0;
  double m2 = 0.0;
  strided_batched<double>(lane, 32, cols,
                          [&](std::int64_t j) {
                            const double d = static_cast<double>(load(row, j)) - mean;
                            return d * d;
                          },
                          [&](std::int64_t, double v) { m2 += v; });
  m2 = warp_reduce(m2, SumOp{});
  if (lane == 0) {
    stats[2 * r] = mean;
    stats[2 * r + 1] = m2;
  }
}

__global__ void merge_row_stats_kernel(const double* s, int parts, double count_per_part, double eps,
                                       double* out, std::int64_t rows, bool centred) {
  MDTP_GRID_STRIDE(i, rows) {
    // Chan et al., merged part by part in the host's order.
    double n = 0.0, mean = 0.0, m2 = 0.0;
    for (int p = 0; p < parts; ++p) {
      const double nb = count_per_part;
      const double mb = s[2 * (p * rows + i)], m2b = s[2 * (p * rows + i) + 1];
      const double total = n + nb;
      const double delta = mb - mean;
      mean += delta * nb / total;
      m2 += m2b + delta * delta * n * nb / total;
      n = total;
    }
    out[2 * i] = centred ? mean : 0.0;  // uncentred (RMSNorm): the mean square is mean² + variance
    out[2 * i + 1] = 1.0 / sqrt((centred ? 0.0 : mean * mean) + m2 / n + eps);
  }
}

template <class T>
__global__ void layernorm_apply_kernel(const T* x, const double* mr, const T* gamma, const T* beta,
                                       T* xhat, T* y, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
    const double mean = mr[2 * i], rstd = mr[2 * i + 1];
    const std::int64_t base = i * cols;
    struct Normalised { T h, y; };
    row_batched<Normalised>(cols,
        [&](std::int64_t j) {
          T h = cast_to<T>((static_cast<double>(load(x, base + j)) - mean) * rstd);
          return Normalised{h, cast_to<T>(load(&h, 0) * load(gamma, j) + load(beta, j))};
        },
        [&](std::int64_t j, Normalised v) {
          xhat[base + j] = v.h;
          y[base + j] = v.y;
        });
  }
}

// A warp per row, as row_mean_m2_kernel.
template <class T>
__global__ void layernorm_backward_sums_kernel(const T* dy, const T* xhat, const T* gamma, double* sums,
                                               std::int64_t rows, std::int64_t cols, bool centred) {
  const std::int64_t r = warp_row<kStatRows>();
  if (r >= rows) return;
  const int lane = threadIdx.x & 31;
  const std::int64_t base = r * cols;
  struct Terms {
    double v, h;  // dy·γ and x̂
  };
  double s1 = 0.0, s2 = 0.0;
  strided_batched<Terms>(lane, 32, cols,
                         [&](std::int64_t j) {
                           return Terms{static_cast<double>(load(dy, base + j)) * static_cast<double>(load(gamma, j)),
                                        static_cast<double>(load(xhat, base + j))};
                         },
                         [&](std::int64_t, Terms t) {
                           s1 += t.v;
                           s2 += t.v * t.h;
                         });
  s1 = warp_reduce(s1, SumOp{});
  s2 = warp_reduce(s2, SumOp{});
  if (lane == 0) {
    sums[2 * r] = centred ? s1 : 0.0;
    sums[2 * r + 1] = s2;
  }
}

template <class T>
__global__ void layernorm_dx_kernel(const T* dy, const T* xhat, const T* gamma, const double* mr,
                                    const double* sums, double inv_n, T* dx, std::int64_t rows,
                                    std::int64_t cols) {
  for (std::int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
    const double rstd = mr[2 * i + 1], s1 = sums[2 * i] * inv_n, s2 = sums[2 * i + 1] * inv_n;
    const std::int64_t base = i * cols;
    row_batched<T>(cols,
        [&](std::int64_t j) {
          const double h = static_cast<double>(load(xhat, base + j));
          const double v = static_cast<double>(load(dy, base + j)) * static_cast<double>(load(gamma, j));
          return cast_to<T>(rstd * (v - s1 - h * s2));
        },
        [&](std::int64_t j, T v) { dx[base + j] = v; });
  }
}


}  // namespace

void fill(DType type, void* x, std::int64_t n, double value, cudaStream_t stream) {
  if (n == 0) return;
  MDTP_DISPATCH_DTYPE(type, T,
    fill_kernel<T><<<grid_for_batched(n), kThreads, 0, stream>>>(static_cast<T*>(x), n, cast_to<T>(value)));
  MDTP_CHECK_LAUNCH();
}

void convert(DType src_type, const void* src, DType dst_type, void* dst, std::int64_t n,
             cudaStream_t stream) {
  if (n == 0) return;
  MDTP_DISPATCH_DTYPE(src_type, S,
    MDTP_DISPATCH_DTYPE(dst_type, D,
      convert_kernel<S, D><<<grid_for_batched(n), kThreads, 0, stream>>>(static_cast<const S*>(src),
                                                                  static_cast<D*>(dst), n)));
  MDTP_CHECK_LAUNCH();
}

void axpy(DType type, double alpha, const void* x, DType y_type, void* y, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  MDTP_DISPATCH_ACCUMULATOR(type, y_type, T, G,
    axpy_kernel<T, G><<<grid_for_batched(n), kThreads, 0, stream>>>(static_cast<Acc<G>>(alpha), static_cast<const T*>(x),
                                                             static_cast<G*>(y), n));
  MDTP_CHECK_LAUNCH();
}

void scale(DType type, void* x, std::int64_t n, double alpha, cudaStream_t stream) {
  if (n == 0) return;
  MDTP_DISPATCH_DTYPE(type, T,
    scale_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<T*>(x), n, static_cast<Acc<T>>(alpha)));
  MDTP_CHECK_LAUNCH();
}

void add_row_vector(DType type, void* y, const void* row, std::int64_t rows, std::int64_t cols,
                    cudaStream_t stream) {
  if (rows * cols == 0) return;
  MDTP_DISPATCH_DTYPE(type, T,
    add_row_vector_kernel<T><<<grid_rows(rows), kThreads, 0, stream>>>(
        static_cast<T*>(y), static_cast<const T*>(row), rows, cols));
  MDTP_CHECK_LAUNCH();
}

std::int64_t column_partials(std::int64_t rows, std::int64_t cols, int sums) {
  return chunk_count(rows, cols) * cols * sums;
}

void column_sums(DType type, const void* x, DType out_type, void* out, std::int64_t rows, std::int64_t cols,
                 double beta, void* workspace, cudaStream_t stream) {
  if (cols == 0) return;
  MDTP_DISPATCH_ACCUMULATOR(type, out_type, T, G,
    launch_column_reduction<T, G>(static_cast<const T*>(x), nullptr, static_cast<G*>(out), nullptr,
                                  static_cast<Acc<T>>(beta), rows, cols, workspace, stream));
}

void sum_squares(DType type, const void* x, std::int64_t n, double* workspace, cudaStream_t stream) {
  const unsigned parts = std::min<unsigned>(grid_for(n), kReduceParts);
  MDTP_DISPATCH_DTYPE(type, T,
    sum_squares_kernel<T><<<parts, kThreads, 0, stream>>>(static_cast<const T*>(x), n, workspace));
  MDTP_CHECK_LAUNCH();
  sum_partials_kernel<<<1, kThreads, 0, stream>>>(workspace, static_cast<int>(parts));
  MDTP_CHECK_LAUNCH();
}

void gelu_forward(DType type, const void* x, void* y, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  MDTP_DISPATCH_DTYPE(type, T,
    gelu_forward_kernel<T><<<grid_for_batched(n), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), n));
  MDTP_CHECK_LAUNCH();
}

void gelu_backward(DType type, const void* x, const void* dy, void* dx, std::int64_t n,
                   cudaStream_t stream) {
  if (n == 0) return;
  MDTP_DISPATCH_DTYPE(type, T,
    gelu_backward_kernel<T><<<grid_for_batched(n), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx), n));
  MDTP_CHECK_LAUNCH();
}

void row_mean_m2(DType type, const void* x, double* stats, std::int64_t rows, std::int64_t cols,
                 cudaStream_t stream) {
  if (rows == 0) return;
  MDTP_DISPATCH_DTYPE(type, T,
    row_mean_m2_kernel<T><<<warp_row_blocks<kStatRows>(rows), kThreads, 0, stream>>>(static_cast<const T*>(x), stats,
                                                                                      rows, cols));
  MDTP_CHECK_LAUNCH();
}

void merge_row_stats(const double* stacked, int parts, std::int64_t count_per_part, double eps,
                     double* mean_rstd, std::int64_t rows, bool centred, cudaStream_t stream) {
  if (rows == 0) return;
  merge_row_stats_kernel<<<grid_for(rows), kThreads, 0, stream>>>(
      stacked, parts, static_cast<double>(count_per_part), eps, mean_rstd, rows, centred);
  MDTP_CHECK_LAUNCH();
}

void layernorm_apply(DType type, const void* x, const double* mean_rstd, const void* gamma,
                     const void* beta, void* xhat, void* y, std::int64_t rows, std::int64_t cols,
                     cudaStream_t stream) {
  if (rows * cols == 0) return;
  MDTP_DISPATCH_DTYPE(type, T,
    layernorm_apply_kernel<T><<<grid_rows(rows), kThreads, 0, stream>>>(
        static_cast<const T*>(x), mean_rstd, static_cast<const T*>(gamma), static_cast<const T*>(beta),
        static_cast<T*>(xhat), static_cast<T*>(y), rows, cols));
  MDTP_CHECK_LAUNCH();
}

void layernorm_backward_sums(DType type, const void* dy, const void* xhat, const void* gamma,
                             double* sums, std::int64_t rows, std::int64_t cols, bool centred,
                             cudaStream_t stream) {
  if (rows == 0) return;
  MDTP_DISPATCH_DTYPE(type, T,
    layernorm_backward_sums_kernel<T><<<warp_row_blocks<kStatRows>(rows), kThreads, 0, stream>>>(
        static_cast<const T*>(dy), static_cast<const T*>(xhat), static_cast<const T*>(gamma), sums, rows, cols,
        centred));
  MDTP_CHECK_LAUNCH();
}

void layernorm_backward(DType type, const void* dy, const void* xhat, const void* gamma,
                        const double* mean_rstd, const double* sums, std::int64_t n_total, void* dx,
                        DType grad_type, void* dgamma, void* dbeta, std::int64_t rows, std::int64_t cols,
                        void* workspace, cudaStream_t stream) {
  if (rows * cols == 0) return;
  MDTP_DISPATCH_ACCUMULATOR(type, grad_type, T, G,
    layernorm_dx_kernel<T><<<grid_rows(rows), kThreads, 0, stream>>>(
        static_cast<const T*>(dy), static_cast<const T*>(xhat), static_cast<const T*>(gamma), mean_rstd,
        sums, 1.0 / static_cast<double>(n_total), static_cast<T*>(dx), rows, cols);
    MDTP_CHECK_LAUNCH();
    // dβ += Σ dy, dγ += Σ dy·x̂, in one pass over dy.
    launch_column_reduction<T, G>(static_cast<const T*>(dy), static_cast<const T*>(xhat), static_cast<G*>(dbeta),
                                  static_cast<G*>(dgamma), Acc<T>(1), rows, cols, workspace, stream));
}

}  // namespace mdtp::kernels
