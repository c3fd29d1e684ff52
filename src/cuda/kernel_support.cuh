#pragma once
// Device-side helpers shared by the two kernel files: the accumulation type of each storage
// type, conversions, block reductions, launch shapes and the dtype dispatch.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "cuda/cuda_check.hpp"
#include "core/narrow_float.hpp"

namespace mdtp::kernels {

// Storage types compute in Acc<T>: float for f32/bf16/f16 (as the host computes f32 in float),
// double for f64.
template <class T>
struct AccOf {
  using type = float;
};
template <>
struct AccOf<double> {
  using type = double;
};
template <class T>
using Acc = typename AccOf<T>::type;

template <class T>
__device__ __forceinline__ Acc<T> load(const T* p, std::int64_t i) {
  return static_cast<Acc<T>>(p[i]);
}
template <>
__device__ __forceinline__ float load<__nv_bfloat16>(const __nv_bfloat16* p, std::int64_t i) {
  return __bfloat162float(p[i]);
}
template <>
__device__ __forceinline__ float load<__half>(const __half* p, std::int64_t i) {
  return __half2float(p[i]);
}

template <class T, class V>
__host__ __device__ __forceinline__ T cast_to(V v) {
  return static_cast<T>(v);
}
template <>
__host__ __device__ __forceinline__ __nv_bfloat16 cast_to<__nv_bfloat16, float>(float v) {
  return __float2bfloat16_rn(v);
}
// From double: one rounding from the double itself (narrow_float.hpp); through float it would
// round twice.
template <>
__host__ __device__ __forceinline__ __nv_bfloat16 cast_to<__nv_bfloat16, double>(double v) {
  __nv_bfloat16_raw raw;
  raw.x = narrow::bf16_from_double(v);
  return __nv_bfloat16(raw);
}
template <>
__host__ __device__ __forceinline__ __half cast_to<__half, float>(float v) {
  return __float2half_rn(v);
}
template <>
__host__ __device__ __forceinline__ __half cast_to<__half, double>(double v) {
  __half_raw raw;
  raw.x = narrow::f16_from_double(v);
  return __half(raw);
}

struct SumOp {
  template <class V>
  __device__ V operator()(V a, V b) const { return a + b; }
};
struct MaxOp {
  template <class V>
  __device__ V operator()(V a, V b) const { return a > b ? a : b; }
};

template <class V, class Op>
__device__ __forceinline__ V warp_reduce(V v, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Reduces over the block (blockDim.x a multiple of 32); every thread gets the result.  The tree
// is fixed, so results are deterministic run to run.  `scratch` holds 32 values.
template <class V, class Op>
__device__ V block_reduce(V v, Op op, V identity, V* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  v = warp_reduce(v, op);
  __syncthreads();  // a previous call may still be reading scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? scratch[lane] : identity;
    v = warp_reduce(v, op);
    if (lane == 0) scratch[0] = v;
  }
  __syncthreads();
  return scratch[0];
}

// Streaming kernels keep several reads in flight per thread: one 2-byte read at a time per
// thread, even at full occupancy, leaves HBM mostly idle (about 1 TB/s of 4.8 measured on an
// H200: docs/GPU.md).  Each round a thread first reads kBatch elements (`load_at`, which may
// compute from what it read), then writes them (`store_at`); the elements a thread visits, and
// their order, are those of the plain loop, so results are bit for bit the same.  Reads of a round
// come before its writes, which is what an in-place kernel (y aliasing x at the same index) needs.
inline constexpr int kBatch = 4;

// The thread's elements first, first + step, ... below n, in rounds of kBatch.
template <class V, class Load, class Store>
__device__ __forceinline__ void strided_batched(std::int64_t first, std::int64_t step, std::int64_t n, Load load_at,
                                                Store store_at) {
  for (std::int64_t i0 = first; i0 < n; i0 += kBatch * step) {
    V v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u)
      if (i0 + u * step < n) v[u] = load_at(i0 + u * step);
#pragma unroll
    for (int u = 0; u < kBatch; ++u)
      if (i0 + u * step < n) store_at(i0 + u * step, v[u]);
  }
}

// Over the columns of one row: j = threadIdx.x, + blockDim.x, ...
template <class V, class Load, class Store>
__device__ __forceinline__ void row_batched(std::int64_t cols, Load load_at, Store store_at) {
  strided_batched<V>(threadIdx.x, blockDim.x, cols, load_at, store_at);
}

// Over n elements with a grid-stride loop: i = the thread's global index, + the grid's size, ...
template <class V, class Load, class Store>
__device__ __forceinline__ void grid_batched(std::int64_t n, Load load_at, Store store_at) {
  strided_batched<V>(blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x, std::int64_t{gridDim.x} * blockDim.x, n,
                     load_at, store_at);
}

inline constexpr int kThreads = 256;
// Grid-stride loops cover any n; the cap keeps the grid within limits and blocks busy.
inline unsigned grid_for(std::int64_t n, int threads = kThreads) {
  return static_cast<unsigned>(std::clamp<std::int64_t>((n + threads - 1) / threads, 1, 65535 * 4));
}
// CUDA's grid limits differ by dimension: 2^31-1 blocks along x, 65535 along y and z.
inline constexpr std::int64_t kMaxGridX = 0x7fffffff, kMaxGridY = 65535;
// Blocks along x for kernels with one block per row (or per column block); callers skip empty
// launches.  2^31-1 rows is far past any activation here; beyond it, a clear error rather than a
// failed launch.
inline unsigned grid_x(std::int64_t blocks) {
  require(blocks <= kMaxGridX, "CUDA kernel over ", blocks, " blocks along x; expected at most 2^31-1");
  return static_cast<unsigned>(blocks);
}
// Kernels that give each row one warp (a row's reductions then are shuffles, with no block barrier),
// kWarps rows per block of 32·kWarps threads: the block's rows, and the blocks over `rows` rows.
// A warp whose row is past the end leaves as a whole, so shuffles always see every lane.
template <int kWarps>
__device__ __forceinline__ std::int64_t warp_row() {
  return blockIdx.x * std::int64_t{kWarps} + (threadIdx.x >> 5);
}
template <int kWarps>
inline unsigned warp_row_blocks(std::int64_t rows) {
  return grid_x((rows + kWarps - 1) / kWarps);
}
// Blocks for grid_batched kernels: kBatch elements per thread in one round where n allows.
inline unsigned grid_for_batched(std::int64_t n, int threads = kThreads) {
  return grid_for((n + kBatch - 1) / kBatch, threads);
}
// Blocks for kernels that stride a block per row over `rows` rows (for (i = blockIdx.x; i < rows;
// i += gridDim.x)): one block per row up to a cap past which blocks take several rows.
inline unsigned grid_rows(std::int64_t rows) {
  return static_cast<unsigned>(std::clamp<std::int64_t>(rows, 1, 65535 * 16));
}
// Blocks along y, capped at 65535: kernels stride over the rest (j += gridDim.y * ...).
inline unsigned grid_y(std::int64_t blocks) {
  return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, kMaxGridY));
}

#define MDTP_CHECK_LAUNCH() MDTP_CUDA_CHECK(cudaGetLastError())

// Runs the statement with T bound to the storage type of `dtype`.
#define MDTP_DISPATCH_DTYPE(dtype, T, ...)                                              \
  switch (dtype) {                                                                      \
    case ::mdtp::DType::f32: { using T = float; __VA_ARGS__; break; }                   \
    case ::mdtp::DType::f64: { using T = double; __VA_ARGS__; break; }                  \
    case ::mdtp::DType::bf16: { using T = __nv_bfloat16; __VA_ARGS__; break; }          \
    case ::mdtp::DType::f16: { using T = __half; __VA_ARGS__; break; }                  \
    default: ::mdtp::throw_error("no CUDA kernel for dtype code ", static_cast<int>(dtype)); \
  }

// Data of dtype `data` (type T) into an accumulator of dtype `acc` (type G): G = T, or float for
// 16-bit data (Backend's accumulator rule: gradients of bf16/f16 data may be kept in f32).
#define MDTP_DISPATCH_ACCUMULATOR(data, acc, T, G, ...)                                              \
  MDTP_DISPATCH_DTYPE(data, T, {                                                                    \
    if ((acc) == (data)) { using G = T; __VA_ARGS__; }                                              \
    else if ((acc) == ::mdtp::DType::f32) { using G = float; __VA_ARGS__; }                        \
    else ::mdtp::throw_error("no CUDA kernel for ", ::mdtp::dtype_name(data), " data into ",         \
                             ::mdtp::dtype_name(acc));                                               \
  })

}  // namespace mdtp::kernels
