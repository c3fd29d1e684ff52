#include "cuda/cuda_allocator.hpp"

#include <bit>

#include "core/error.hpp"
#include "cuda/cuda_check.hpp"

namespace mdtp {

CudaAllocator::CudaAllocator(int device) : device_(device) {
  if (device_ < 0) MDTP_CUDA_CHECK(cudaGetDevice(&device_));
  else MDTP_CUDA_CHECK(cudaSetDevice(device_));
}

CudaAllocator::~CudaAllocator() {
  // Every Storage holds this allocator, so only cached blocks can remain here.
  for (auto& [size, blocks] : free_blocks_)
    for (void* block : blocks) cuda_ok_in_destructor(cudaFree(block), "cudaFree");
}

std::size_t CudaAllocator::size_class(std::size_t bytes) {
  constexpr std::size_t granule = 512, small_limit = std::size_t{1} << 20;
  auto round_up = [](std::size_t n, std::size_t step) { return (n + step - 1) / step * step; };
  if (bytes <= granule) return granule;
  if (bytes <= small_limit) return round_up(bytes, granule);
  std::size_t below = std::bit_floor(bytes - 1);  // the power of two under `bytes`
  return round_up(bytes, below / 4);
}

void* CudaAllocator::raw_allocate(std::size_t bytes) {
  std::size_t block = size_class(bytes);
  std::lock_guard lock(mutex_);
  auto it = free_blocks_.find(block);
  if (it != free_blocks_.end() && !it->second.empty()) {
    void* pointer = it->second.back();
    it->second.pop_back();
    stats_.cached_bytes -= static_cast<std::int64_t>(block);
    ++stats_.reuses;
    return pointer;
  }
  void* pointer = nullptr;
  cudaError_t status = cudaMalloc(&pointer, block);
  if (status == cudaErrorMemoryAllocation && stats_.cached_bytes > 0) {
    // Cached blocks of other sizes may be what stands in the way: give them back and retry.
    (void)cudaGetLastError();
    release_cached_locked();
    status = cudaMalloc(&pointer, block);
  }
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    throw_error("cudaMalloc of ", block, " bytes (for a request of ", bytes, ") on device ", device_,
                " failed: ", cudaGetErrorString(status), "; this pool holds ", stats_.reserved_bytes,
                " bytes, ", stats_.cached_bytes, " of them cached");
  }
  stats_.reserved_bytes += static_cast<std::int64_t>(block);
  ++stats_.cuda_mallocs;
  return pointer;
}

void CudaAllocator::raw_release(void* pointer, std::size_t bytes) {
  std::size_t block = size_class(bytes);
  std::lock_guard lock(mutex_);
  free_blocks_[block].push_back(pointer);
  stats_.cached_bytes += static_cast<std::int64_t>(block);
}

void CudaAllocator::release_cached() {
  std::lock_guard lock(mutex_);
  release_cached_locked();
}

void CudaAllocator::release_cached_locked() {
  for (auto& [size, blocks] : free_blocks_) {
    while (!blocks.empty()) {
      MDTP_CUDA_CHECK(cudaFree(blocks.back()));
      blocks.pop_back();
      stats_.reserved_bytes -= static_cast<std::int64_t>(size);
      stats_.cached_bytes -= static_cast<std::int64_t>(size);
    }
  }
}

CudaPoolStats CudaAllocator::pool_stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace mdtp
