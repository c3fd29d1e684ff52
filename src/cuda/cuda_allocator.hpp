#pragma once
// Device memory for one rank's GPU: plain cudaMalloc (never managed memory, so what the tracker
// reports is what the GPU holds) behind a caching pool, because cudaMalloc/cudaFree synchronise
// the device and would serialise every layer's temporaries.
//
// Accounting is the base Allocator's: the MemoryTracker sees the bytes each tensor asked for,
// per category, exactly as on the host; the pool's own view (bytes held from the driver, bytes
// cached for reuse) is pool_stats().
//
// Reuse is safe without events because every device op of a rank is ordered after the backend's
// stream: kernels run on it, and NCCL streams wait on it before they start (see
// nccl_communicator.hpp).  A block released while a queued kernel still reads it can only be
// handed to work queued after that kernel.
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/memory.hpp"

namespace mdtp {

struct CudaPoolStats {
  std::int64_t reserved_bytes = 0;  // held from cudaMalloc: blocks in use + cached
  std::int64_t cached_bytes = 0;    // free blocks waiting for reuse
  std::int64_t cuda_mallocs = 0;    // allocations that went to the driver
  std::int64_t reuses = 0;          // allocations served from the cache
};

class CudaAllocator final : public Allocator {
 public:
  // Binds to `device` (cudaSetDevice); -1 keeps the current device.
  explicit CudaAllocator(int device = -1);
  ~CudaAllocator() override;
  CudaAllocator(const CudaAllocator&) = delete;
  CudaAllocator& operator=(const CudaAllocator&) = delete;

  DeviceKind device() const override { return DeviceKind::cuda; }
  int device_index() const { return device_; }

  // Returns every cached block to the driver (cudaFree); blocks in use are untouched.
  void release_cached();
  CudaPoolStats pool_stats() const;

  // The block size a request is served with: 512-byte granules up to 1 MiB, then four classes
  // per power of two (at most 25% slack), so freed blocks are found again by exact size.
  static std::size_t size_class(std::size_t bytes);

 protected:
  void* raw_allocate(std::size_t bytes) override;
  void raw_release(void* pointer, std::size_t bytes) override;

 private:
  void release_cached_locked();

  int device_;
  mutable std::mutex mutex_;  // tensors may be dropped from other threads
  std::unordered_map<std::size_t, std::vector<void*>> free_blocks_;  // by size class
  CudaPoolStats stats_;
};

}  // namespace mdtp
