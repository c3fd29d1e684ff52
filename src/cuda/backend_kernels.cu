// Kernels behind CudaBackend.  Each mirrors the host backend's arithmetic (host_backend.cpp):
// the same formulas, f32 math in float, f64 math in double, LayerNorm statistics in double, so
// the two backends agree to rounding.  Elementwise kernels use grid-stride loops; row
// statistics use one block per row; column sums one block per 32 columns.
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

// Column reductions: a block covers 32 columns (threadIdx.x) with kColumnRows row lanes
// (threadIdx.y) striding over the rows, then sums the lanes in a fixed order.
constexpr int kColumnRows = 16;

template <class T, class G>
__global__ void column_sums_kernel(const T* x, G* out, std::int64_t rows, std::int64_t cols, Acc<T> beta) {
  __shared__ Acc<T> partial[kColumnRows][33];
  const std::int64_t col = blockIdx.x * std::int64_t{32} + threadIdx.x;
  Acc<T> s = 0;
  if (col < cols)
    for (std::int64_t r = threadIdx.y; r < rows; r += kColumnRows) s += load(x, r * cols + col);
  partial[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    Acc<T> total = 0;
    for (int k = 0; k < kColumnRows; ++k) total += partial[k][threadIdx.x];
    // beta == 0 overwrites, so an uninitialised `out` (even NaN) is fine, as on the host.
    Acc<T> base = beta == Acc<T>(0) ? Acc<T>(0) : beta * static_cast<Acc<T>>(load(out, col));
    out[col] = cast_to<G>(base + total);
  }
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

// Two passes (mean, then squared deviations), as on the host: no cancellation in M2.
template <class T>
__global__ void row_mean_m2_kernel(const T* x, double* stats, std::int64_t cols) {
  __shared__ double scratch[32];
  const T* row = x + blockIdx.x * cols;
  double s = 0.0;
  for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += static_cast<double>(load(row, j));
  s = block_reduce(s, SumOp{}, 0.0, scratch);
  const double mean = cols ? s / static_cast<double>(cols) : 0.0;
  double m2 = 0.0;
  for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    double d = static_cast<double>(load(row, j)) - mean;
    m2 += d * d;
  }
  m2 = block_reduce(m2, SumOp{}, 0.0, scratch);
  if (threadIdx.x == 0) {
    stats[2 * blockIdx.x] = mean;
    stats[2 * blockIdx.x + 1] = m2;
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

template <class T>
__global__ void layernorm_backward_sums_kernel(const T* dy, const T* xhat, const T* gamma,
                                               double* sums, std::int64_t cols, bool centred) {
  __shared__ double scratch[32];
  const std::int64_t base = blockIdx.x * cols;
  double s1 = 0.0, s2 = 0.0;
  for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    double v = static_cast<double>(load(dy, base + j)) * static_cast<double>(load(gamma, j));
    s1 += v;
    s2 += v * static_cast<double>(load(xhat, base + j));
  }
  s1 = block_reduce(s1, SumOp{}, 0.0, scratch);
  s2 = block_reduce(s2, SumOp{}, 0.0, scratch);
  if (threadIdx.x == 0) {
    sums[2 * blockIdx.x] = centred ? s1 : 0.0;
    sums[2 * blockIdx.x + 1] = s2;
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

// dgamma += colsum(dy * xhat), dbeta += colsum(dy) in one pass over dy.
template <class T, class G>
__global__ void layernorm_param_grads_kernel(const T* dy, const T* xhat, G* dgamma, G* dbeta,
                                             std::int64_t rows, std::int64_t cols) {
  __shared__ Acc<T> pg[kColumnRows][33];
  __shared__ Acc<T> pb[kColumnRows][33];
  const std::int64_t col = blockIdx.x * std::int64_t{32} + threadIdx.x;
  Acc<T> g = 0, b = 0;
  if (col < cols)
    for (std::int64_t r = threadIdx.y; r < rows; r += kColumnRows) {
      Acc<T> d = load(dy, r * cols + col);
      g += d * load(xhat, r * cols + col);
      b += d;
    }
  pg[threadIdx.y][threadIdx.x] = g;
  pb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    Acc<T> tg = 0, tb = 0;
    for (int k = 0; k < kColumnRows; ++k) {
      tg += pg[k][threadIdx.x];
      tb += pb[k][threadIdx.x];
    }
    dgamma[col] = cast_to<G>(static_cast<Acc<T>>(load(dgamma, col)) + tg);
    dbeta[col] = cast_to<G>(static_cast<Acc<T>>(load(dbeta, col)) + tb);
  }
}

unsigned column_blocks(std::int64_t cols) { return grid_x((cols + 31) / 32); }

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

void column_sums(DType type, const void* x, DType out_type, void* out, std::int64_t rows, std::int64_t cols,
                 double beta, cudaStream_t stream) {
  if (cols == 0) return;
  MDTP_DISPATCH_ACCUMULATOR(type, out_type, T, G,
    column_sums_kernel<T, G><<<column_blocks(cols), dim3(32, kColumnRows), 0, stream>>>(
        static_cast<const T*>(x), static_cast<G*>(out), rows, cols, static_cast<Acc<T>>(beta)));
  MDTP_CHECK_LAUNCH();
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
    row_mean_m2_kernel<T><<<grid_x(rows), kThreads, 0, stream>>>(static_cast<const T*>(x), stats, cols));
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
    layernorm_backward_sums_kernel<T><<<grid_x(rows), kThreads, 0, stream>>>(
        static_cast<const T*>(dy), static_cast<const T*>(xhat), static_cast<const T*>(gamma), sums, cols, centred));
  MDTP_CHECK_LAUNCH();
}

void layernorm_backward(DType type, const void* dy, const void* xhat, const void* gamma,
                        const double* mean_rstd, const double* sums, std::int64_t n_total, void* dx,
                        DType grad_type, void* dgamma, void* dbeta, std::int64_t rows, std::int64_t cols,
                        cudaStream_t stream) {
  if (rows * cols == 0) return;
  MDTP_DISPATCH_ACCUMULATOR(type, grad_type, T, G,
    layernorm_dx_kernel<T><<<grid_rows(rows), kThreads, 0, stream>>>(
        static_cast<const T*>(dy), static_cast<const T*>(xhat), static_cast<const T*>(gamma), mean_rstd,
        sums, 1.0 / static_cast<double>(n_total), static_cast<T*>(dx), rows, cols);
    MDTP_CHECK_LAUNCH();
    layernorm_param_grads_kernel<T, G><<<column_blocks(cols), dim3(32, kColumnRows), 0, stream>>>(
        static_cast<const T*>(dy), static_cast<const T*>(xhat), static_cast<G*>(dgamma),
        static_cast<G*>(dbeta), rows, cols));
  MDTP_CHECK_LAUNCH();
}

}  // namespace mdtp::kernels
