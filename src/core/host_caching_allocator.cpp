#include "core/host_caching_allocator.hpp"

#include <algorithm>
#include <cstdlib>

#include "core/error.hpp"

namespace mdtp {
namespace {

constexpr std::size_t kAlignment = 64;

// Bytes actually reserved for a request: 64-byte multiples below the caching size, 4 KiB
// multiples (a size class) from it on.
std::size_t block_size(std::size_t bytes) {
  const std::size_t unit = bytes >= CachingHostAllocator::kMinCachedBlock ? 4096 : kAlignment;
  return std::max(kAlignment, (bytes + unit - 1) / unit * unit);
}

}  // namespace

CachingHostAllocator::~CachingHostAllocator() {
  for (auto& [size, blocks] : free_)
    for (void* p : blocks) std::free(p);
}

std::size_t CachingHostAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_;
}

void* CachingHostAllocator::raw_allocate(std::size_t bytes) {
  const std::size_t size = block_size(bytes);
  if (size >= kMinCachedBlock) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      cached_ -= size;
      return p;
    }
  }
  void* pointer = std::aligned_alloc(kAlignment, size);
  if (pointer == nullptr) throw_error("host allocation of ", bytes, " bytes failed");
  return pointer;
}

void CachingHostAllocator::raw_release(void* pointer, std::size_t bytes) {
  const std::size_t size = block_size(bytes);
  if (size >= kMinCachedBlock) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cached_ + size <= kMaxCachedBytes) {
      free_[size].push_back(pointer);
      cached_ += size;
      return;
    }
  }
  std::free(pointer);
}

}  // namespace mdtp
