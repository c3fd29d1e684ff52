// Kernels of the training ops (train_ops.hpp): row softmax, cross-entropy, AdamW.  Rows are one
// block each; row reductions are deterministic (fixed trees).  Cross-entropy's log-sum-exp is
// accumulated in double so the loss is accurate to the printed digits even over a 50k vocabulary.
#include <cmath>
#include <type_traits>

#include "cuda/cuda_kernels.hpp"
#include "cuda/kernel_support.cuh"

namespace mdtp::kernels {
namespace {

// Last unmasked column of a row (cols - 1 without a mask).
__device__ __forceinline__ std::int64_t last_column(std::int64_t row, std::int64_t cols,
                                                    std::int64_t causal_queries) {
  if (causal_queries <= 0) return cols - 1;
  return row % causal_queries + cols - causal_queries;
}

template <class T>
__global__ void softmax_kernel(const T* x, T* y, std::int64_t cols, std::int64_t causal_queries) {
  using A = Acc<T>;
  __shared__ A scratch[32];
  const std::int64_t base = blockIdx.x * cols;
  const std::int64_t last = last_column(blockIdx.x, cols, causal_queries);
  A mx = -INFINITY;
  for (std::int64_t j = threadIdx.x; j <= last && j < cols; j += blockDim.x) mx = max(mx, load(x, base + j));
  mx = block_reduce(mx, MaxOp{}, A(-INFINITY), scratch);
  A s = 0;
  for (std::int64_t j = threadIdx.x; j <= last && j < cols; j += blockDim.x) s += exp(load(x, base + j) - mx);
  s = block_reduce(s, SumOp{}, A(0), scratch);
  // A fully masked row (more queries than keys) is all zeros rather than 0/0.
  const A inv = s > A(0) ? A(1) / s : A(0);
  for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    y[base + j] = cast_to<T>(j <= last ? exp(load(x, base + j) - mx) * inv : A(0));
}

// The same softmax with the row kept in shared memory (`cols` accumulators, when they fit): the
// row is read from memory once and each exponential computed once, where the kernel above reads
// the row three times and takes each exponential twice.  The same operations in the same order, so
// the same bits.
template <class T>
__global__ void softmax_cached_kernel(const T* x, T* y, std::int64_t cols, std::int64_t causal_queries) {
  using A = Acc<T>;
  extern __shared__ unsigned char cache_bytes[];
  A* row = reinterpret_cast<A*>(cache_bytes);
  __shared__ A scratch[32];
  const std::int64_t base = blockIdx.x * cols;
  const std::int64_t last = last_column(blockIdx.x, cols, causal_queries);
  A mx = -INFINITY;
  row_batched<A>(last + 1 < cols ? last + 1 : cols, [&](std::int64_t j) { return load(x, base + j); },
                 [&](std::int64_t j, A v) {
                   row[j] = v;
                   mx = max(mx, v);
                 });
  mx = block_reduce(mx, MaxOp{}, A(-INFINITY), scratch);
  A s = 0;
  for (std::int64_t j = threadIdx.x; j <= last && j < cols; j += blockDim.x) {
    row[j] = exp(row[j] - mx);  // each thread reads back only the columns it wrote
    s += row[j];
  }
  s = block_reduce(s, SumOp{}, A(0), scratch);
  const A inv = s > A(0) ? A(1) / s : A(0);
  for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) y[base + j] = cast_to<T>(j <= last ? row[j] * inv : A(0));
}

// Backward with y and dy kept in shared memory: each read once (the kernel below reads both twice).
template <class T>
__global__ void softmax_backward_cached_kernel(const T* y, const T* dy, T* dx, std::int64_t cols, Acc<T> scale) {
  using A = Acc<T>;
  extern __shared__ unsigned char cache_bytes[];
  A* yc = reinterpret_cast<A*>(cache_bytes);
  A* dyc = yc + cols;
  __shared__ A scratch[32];
  const std::int64_t base = blockIdx.x * cols;
  A dot = 0;
  struct Pair { A y, dy; };
  row_batched<Pair>(cols, [&](std::int64_t j) { return Pair{load(y, base + j), load(dy, base + j)}; },
                    [&](std::int64_t j, Pair v) {
                      yc[j] = v.y;
                      dyc[j] = v.dy;
                      dot += v.y * v.dy;
                    });
  dot = block_reduce(dot, SumOp{}, A(0), scratch);
  for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    dx[base + j] = cast_to<T>(scale * yc[j] * (dyc[j] - dot));  // dx may alias dy
}

template <class T>
__global__ void softmax_backward_kernel(const T* y, const T* dy, T* dx, std::int64_t cols, Acc<T> scale) {
  using A = Acc<T>;
  __shared__ A scratch[32];
  const std::int64_t base = blockIdx.x * cols;
  A dot = 0;
  for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) dot += load(y, base + j) * load(dy, base + j);
  dot = block_reduce(dot, SumOp{}, A(0), scratch);
  for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    dx[base + j] = cast_to<T>(scale * load(y, base + j) * (load(dy, base + j) - dot));  // dx may alias dy
}

// Rows of at most kWarpRowColumns columns (attention's T x T scores up to T = 1024) take one warp
// each, the row in registers: a block-wide reduction (two barriers and shared memory per
// reduction) over a 1024-column row costs more than its reads, which is what bounded the
// block-per-row kernels above (the profile in docs/GPU.md).  Lane l holds columns l, l + 32, ...
// (kPerLane of them), so each warp-wide read is contiguous; the reductions are fixed shuffle trees
// (deterministic, a different order from the block kernels, so not their bits).
inline constexpr std::int64_t kWarpRowColumns = 1024;
inline constexpr int kWarpsPerBlock = 4;

template <class T, int kPerLane>
__global__ void softmax_warp_kernel(const T* x, T* y, std::int64_t rows, std::int64_t cols,
                                    std::int64_t causal_queries) {
  using A = Acc<T>;
  const std::int64_t row = warp_row<kWarpsPerBlock>();
  if (row >= rows) return;  // the whole warp leaves together: the shuffles below see every lane
  const int lane = threadIdx.x & 31;
  const std::int64_t base = row * cols;
  const std::int64_t last = last_column(row, cols, causal_queries);
  const std::int64_t unmasked = last + 1 < cols ? last + 1 : cols;  // masked columns are not read
  A v[kPerLane];
  A mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const std::int64_t j = lane + 32 * i;
    v[i] = j < unmasked ? load(x, base + j) : A(-INFINITY);
    mx = max(mx, v[i]);
  }
  mx = warp_reduce(mx, MaxOp{});
  A s = 0;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i)
    if (lane + 32 * i < unmasked) {
      v[i] = exp(v[i] - mx);
      s += v[i];
    }
  s = warp_reduce(s, SumOp{});
  const A inv = s > A(0) ? A(1) / s : A(0);  // a fully masked row is zeros, not 0/0
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const std::int64_t j = lane + 32 * i;
    if (j < cols) y[base + j] = cast_to<T>(j < unmasked ? v[i] * inv : A(0));
  }
}

template <class T, int kPerLane>
__global__ void softmax_backward_warp_kernel(const T* y, const T* dy, T* dx, std::int64_t rows, std::int64_t cols,
                                             Acc<T> scale) {
  using A = Acc<T>;
  const std::int64_t row = warp_row<kWarpsPerBlock>();
  if (row >= rows) return;
  const int lane = threadIdx.x & 31;
  const std::int64_t base = row * cols;
  A yv[kPerLane], dyv[kPerLane];
  A dot = 0;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const std::int64_t j = lane + 32 * i;
    yv[i] = j < cols ? load(y, base + j) : A(0);
    dyv[i] = j < cols ? load(dy, base + j) : A(0);
    dot += yv[i] * dyv[i];
  }
  dot = warp_reduce(dot, SumOp{});
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const std::int64_t j = lane + 32 * i;
    if (j < cols) dx[base + j] = cast_to<T>(scale * yv[i] * (dyv[i] - dot));  // dx may alias dy: read above
  }
}

// Columns per lane: the smallest of 4, 8, 16, 32 that holds the row (cols <= kWarpRowColumns).
template <class Launch>
void with_columns_per_lane(std::int64_t cols, Launch launch) {
  if (cols <= 128) launch(std::integral_constant<int, 4>{});
  else if (cols <= 256) launch(std::integral_constant<int, 8>{});
  else if (cols <= 512) launch(std::integral_constant<int, 16>{});
  else launch(std::integral_constant<int, 32>{});
}

template <class T>
__global__ void cross_entropy_forward_kernel(const T* logits, const std::int32_t* targets,
                                             double* losses, double* lse, std::int64_t cols) {
  using A = Acc<T>;
  __shared__ A scratch[32];
  __shared__ double dscratch[32];
  const std::int64_t row = blockIdx.x, base = row * cols;
  A mx = -INFINITY;
  for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) mx = max(mx, load(logits, base + j));
  mx = block_reduce(mx, MaxOp{}, A(-INFINITY), scratch);
  double s = 0.0;
  for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    s += static_cast<double>(exp(load(logits, base + j) - mx));
  s = block_reduce(s, SumOp{}, 0.0, dscratch);
  if (threadIdx.x == 0) {
    const double l = static_cast<double>(mx) + log(s);
    const std::int32_t t = targets[row];
    lse[row] = l;
    // Negative targets are ignored (padding); targets past the vocabulary poison the loss with
    // NaN rather than reading out of bounds.
    if (t < 0) losses[row] = 0.0;
    else if (t >= cols) losses[row] = NAN;
    else losses[row] = l - static_cast<double>(load(logits, base + t));
  }
}

template <class T>
__global__ void cross_entropy_backward_kernel(const T* logits, const std::int32_t* targets,
                                              const double* lse, double scale, T* dlogits,
                                              std::int64_t rows, std::int64_t cols) {
  using A = Acc<T>;
  for (std::int64_t k = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; k < rows * cols;
       k += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t i = k / cols, j = k % cols;
    const std::int32_t t = targets[i];
    A g;
    if (t < 0) g = A(0);
    else if (t >= cols) g = A(NAN);
    else {
      A p = exp(load(logits, k) - static_cast<A>(lse[i]));
      g = static_cast<A>(scale) * (p - (j == t ? A(1) : A(0)));
    }
    dlogits[k] = cast_to<T>(g);  // may alias logits: each element is read before it is written
  }
}

// AdamW with the host backend's arithmetic (see AdamWScalars) in the state's accumulation type.
template <class P, class G, class S>
__global__ void adamw_kernel(P* param, const G* grad, S* master, S* m, S* v, std::int64_t n, AdamWScalars c) {
  using A = Acc<S>;
  const A b1 = static_cast<A>(c.beta1), b2 = static_cast<A>(c.beta2), decay = static_cast<A>(c.decay);
  const A step_size = static_cast<A>(c.step_size), inv_sqrt_c2 = static_cast<A>(c.inv_sqrt_c2);
  const A eps = static_cast<A>(c.eps), gs = static_cast<A>(c.grad_scale);
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const A g = static_cast<A>(load(grad, i)) * gs;
    const A mi = b1 * load(m, i) + (A(1) - b1) * g;
    const A vi = b2 * load(v, i) + (A(1) - b2) * g * g;
    m[i] = cast_to<S>(mi);
    v[i] = cast_to<S>(vi);
    A w = master ? load(master, i) : static_cast<A>(load(param, i));
    w = w * decay - step_size * mi / (sqrt(vi) * inv_sqrt_c2 + eps);
    if (master) master[i] = cast_to<S>(w);
    param[i] = cast_to<P>(w);
  }
}

template <class P, class G, class S>
void launch_adamw(void* param, const void* grad, void* master, void* m, void* v, std::int64_t n,
                  const AdamWScalars& c, cudaStream_t stream) {
  adamw_kernel<P, G, S><<<grid_for(n), kThreads, 0, stream>>>(
      static_cast<P*>(param), static_cast<const G*>(grad), static_cast<S*>(master), static_cast<S*>(m),
      static_cast<S*>(v), n, c);
}

// Shared memory a row cache may take without opting in to more (48 KiB per block by default),
// less the kernels' static reduction scratch.
constexpr std::size_t kRowCacheBytes = 48 * 1024 - 512;

}  // namespace

void softmax_rows(DType type, const void* x, void* y, std::int64_t rows, std::int64_t cols,
                  std::int64_t causal_queries, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  MDTP_DISPATCH_DTYPE(type, T, {
    const std::size_t cache = static_cast<std::size_t>(cols) * sizeof(Acc<T>);
    if (cols <= kWarpRowColumns)
      with_columns_per_lane(cols, [&](auto per_lane) {
        softmax_warp_kernel<T, decltype(per_lane)::value>
            <<<warp_row_blocks<kWarpsPerBlock>(rows), 32 * kWarpsPerBlock, 0, stream>>>(
                static_cast<const T*>(x), static_cast<T*>(y), rows, cols, causal_queries);
      });
    else if (cache <= kRowCacheBytes)
      softmax_cached_kernel<T><<<grid_x(rows), kThreads, cache, stream>>>(static_cast<const T*>(x),
                                                                           static_cast<T*>(y), cols, causal_queries);
    else
      softmax_kernel<T><<<grid_x(rows), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), cols,
                                                                   causal_queries);
  });
  MDTP_CHECK_LAUNCH();
}

void softmax_rows_backward(DType type, const void* y, const void* dy, void* dx, std::int64_t rows,
                           std::int64_t cols, double scale, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  MDTP_DISPATCH_DTYPE(type, T, {
    const std::size_t cache = 2 * static_cast<std::size_t>(cols) * sizeof(Acc<T>);
    if (cols <= kWarpRowColumns)
      with_columns_per_lane(cols, [&](auto per_lane) {
        softmax_backward_warp_kernel<T, decltype(per_lane)::value>
            <<<warp_row_blocks<kWarpsPerBlock>(rows), 32 * kWarpsPerBlock, 0, stream>>>(static_cast<const T*>(y), static_cast<const T*>(dy),
                                                                       static_cast<T*>(dx), rows, cols,
                                                                       static_cast<Acc<T>>(scale));
      });
    else if (cache <= kRowCacheBytes)
      softmax_backward_cached_kernel<T><<<grid_x(rows), kThreads, cache, stream>>>(
          static_cast<const T*>(y), static_cast<const T*>(dy), static_cast<T*>(dx), cols, static_cast<Acc<T>>(scale));
    else
      softmax_backward_kernel<T><<<grid_x(rows), kThreads, 0, stream>>>(
          static_cast<const T*>(y), static_cast<const T*>(dy), static_cast<T*>(dx), cols, static_cast<Acc<T>>(scale));
  });
  MDTP_CHECK_LAUNCH();
}

void cross_entropy_forward(DType type, const void* logits, const std::int32_t* targets,
                           double* losses, double* lse, std::int64_t rows, std::int64_t cols,
                           cudaStream_t stream) {
  if (rows == 0) return;
  MDTP_DISPATCH_DTYPE(type, T,
    cross_entropy_forward_kernel<T><<<grid_x(rows), kThreads, 0, stream>>>(
        static_cast<const T*>(logits), targets, losses, lse, cols));
  MDTP_CHECK_LAUNCH();
}

void cross_entropy_backward(DType type, const void* logits, const std::int32_t* targets,
                            const double* lse, double scale, void* dlogits, std::int64_t rows,
                            std::int64_t cols, cudaStream_t stream) {
  if (rows * cols == 0) return;
  MDTP_DISPATCH_DTYPE(type, T,
    cross_entropy_backward_kernel<T><<<grid_for(rows * cols), kThreads, 0, stream>>>(
        static_cast<const T*>(logits), targets, lse, scale, static_cast<T*>(dlogits), rows, cols));
  MDTP_CHECK_LAUNCH();
}

AdamWScalars adamw_scalars(double lr, double beta1, double beta2, double eps, double weight_decay,
                           std::int64_t step, double grad_scale) {
  require(step >= 1, "adamw_update: step counts from 1; got ", step);
  const double t = static_cast<double>(step);
  const double c1 = 1.0 - std::pow(beta1, t), c2 = 1.0 - std::pow(beta2, t);
  return {beta1, beta2, 1.0 - lr * weight_decay, lr / c1, 1.0 / std::sqrt(c2), eps, grad_scale};
}

void require_adamw_state(DType state, const char* what) {
  require(state != DType::f16, what, " is f16; AdamW moments must be f32, f64 or bf16: f16's range loses the ",
          "second moment (v = (1-beta2)*g^2 flushes to zero below |g| ~ 1e-3); for f16 parameters use ",
          "adamw_update of cuda/train_ops.hpp, which keeps master weights, m and v in f32");
}

void adamw(DType param_type, void* param, DType grad_type, const void* grad, DType state_type,
           void* master, void* m, void* v, std::int64_t n, const AdamWScalars& s,
           cudaStream_t stream) {
  require_adamw_state(state_type, "adamw state (m, v)");
  if (n == 0) return;
  // The supported combinations (callers validate them first).
  auto is = [&](DType p, DType g, DType st) { return param_type == p && grad_type == g && state_type == st; };
  using B = __nv_bfloat16;
  using H = __half;
  using F = float;
  if (is(DType::f32, DType::f32, DType::f32)) launch_adamw<F, F, F>(param, grad, master, m, v, n, s, stream);
  else if (is(DType::f64, DType::f64, DType::f64)) launch_adamw<double, double, double>(param, grad, master, m, v, n, s, stream);
  else if (is(DType::bf16, DType::bf16, DType::bf16)) launch_adamw<B, B, B>(param, grad, master, m, v, n, s, stream);
  else if (is(DType::bf16, DType::bf16, DType::f32)) launch_adamw<B, B, F>(param, grad, master, m, v, n, s, stream);
  else if (is(DType::bf16, DType::f32, DType::f32)) launch_adamw<B, F, F>(param, grad, master, m, v, n, s, stream);
  else if (is(DType::f16, DType::f16, DType::f32)) launch_adamw<H, H, F>(param, grad, master, m, v, n, s, stream);
  else if (is(DType::f16, DType::f32, DType::f32)) launch_adamw<H, F, F>(param, grad, master, m, v, n, s, stream);
  else
    throw_error("adamw: no kernel for param ", dtype_name(param_type), ", grad ", dtype_name(grad_type),
                ", state ", dtype_name(state_type));
  MDTP_CHECK_LAUNCH();
}

}  // namespace mdtp::kernels
