#pragma once
// The host backend's allocator: HostAllocator's 64-byte-aligned blocks, but a freed block of
// 64 KiB or more is kept for the next request of the same size class instead of going back to
// the C library.  A training step frees every activation at its end and asks for the same sizes
// again in the next; returned to the OS (glibc unmaps large blocks and trims the heap top), each
// step page-faulted and zeroed them anew — 9 % of a step of the small GPT on one core.  The CUDA
// path's allocator caches for the same reason.
//
// Size classes are 4 KiB multiples; at most kMaxCachedBytes stay cached (a block past that is
// freed at once), so a run whose sizes never repeat holds no more than that.  Accounting
// (MemoryTracker) is of the bytes asked for, as before: cached blocks are not "in use".
#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/memory.hpp"

namespace mdtp {

class CachingHostAllocator final : public Allocator {
 public:
  static constexpr std::size_t kMinCachedBlock = 64 * 1024;
  static constexpr std::size_t kMaxCachedBytes = std::size_t{1} << 30;

  CachingHostAllocator() = default;
  ~CachingHostAllocator() override;
  CachingHostAllocator(const CachingHostAllocator&) = delete;
  CachingHostAllocator& operator=(const CachingHostAllocator&) = delete;

  DeviceKind device() const override { return DeviceKind::host; }
  std::size_t cached_bytes() const;

 protected:
  void* raw_allocate(std::size_t bytes) override;
  void raw_release(void* pointer, std::size_t bytes) override;

 private:
  mutable std::mutex mutex_;  // tensors may be released from another thread
  std::unordered_map<std::size_t, std::vector<void*>> free_;  // size class -> cached blocks
  std::size_t cached_ = 0;
};

}  // namespace mdtp
