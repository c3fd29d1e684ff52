#pragma once
// Seconds per call of a sequence of GPU work, timed with CUDA events on one stream: the benchmarks'
// shared clock (bench_gemm_cuda, bench_kernels_cuda, bench_gpt_cuda's peak GEMM).
#include <cuda_runtime_api.h>

#include "cuda/cuda_check.hpp"

namespace mdtp::gpu_test {

// Runs `fn` three times to warm up (allocations, cuBLAS heuristics, clocks), then `iters` times
// between two events recorded on `stream`; `fn` must enqueue its work on that stream.
template <class Fn>
double time_per_call(cudaStream_t stream, int iters, Fn&& fn) {
  for (int i = 0; i < 3; ++i) fn();
  cudaEvent_t start, end;
  MDTP_CUDA_CHECK(cudaEventCreate(&start));
  MDTP_CUDA_CHECK(cudaEventCreate(&end));
  MDTP_CUDA_CHECK(cudaEventRecord(start, stream));
  for (int i = 0; i < iters; ++i) fn();
  MDTP_CUDA_CHECK(cudaEventRecord(end, stream));
  MDTP_CUDA_CHECK(cudaEventSynchronize(end));
  float ms = 0.0f;
  MDTP_CUDA_CHECK(cudaEventElapsedTime(&ms, start, end));
  cudaEventDestroy(start);
  cudaEventDestroy(end);
  return ms * 1e-3 / iters;
}

}  // namespace mdtp::gpu_test
