#include "simulate/synthetic_allocator.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <mutex>
#include <vector>

#ifdef MDTP_SMPI
#include <smpi/smpi.h>
#endif

#include "core/error.hpp"

namespace mdtp::simulate {
namespace {

// The arena grows in steps of at least this much (and at least doubles), so that a run's growing
// tensor sizes map a few regions, not one per size.
constexpr std::size_t kArenaStep = std::size_t{64} << 20;

// Offsets are handed out in multiples of this (a GPU allocator's alignment, too).
constexpr std::size_t kAlignment = 256;

std::size_t aligned(std::size_t bytes) {
  return std::max(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
}

class SyntheticArena {
 public:
  // The start of the newest region, grown first to hold offsets [0, end) if it is smaller.
  char* region_holding(std::size_t end) {
    std::lock_guard lock(mutex_);
    if (regions_.empty() || regions_.back().bytes < end) {
      const std::size_t largest = regions_.empty() ? 0 : regions_.back().bytes;
      const std::size_t size = std::max((end + kArenaStep - 1) / kArenaStep * kArenaStep, 2 * largest);
      regions_.push_back({static_cast<char*>(map_region(size)), size});
    }
    return regions_.back().start;
  }

  std::size_t bytes() const {
    std::lock_guard lock(mutex_);
    return regions_.empty() ? 0 : regions_.back().bytes;
  }

 private:
  struct Region {
    char* start;
    std::size_t bytes;
  };

  static void* map_region(std::size_t bytes) {
#ifdef MDTP_SMPI
    // `mdtp simulate --values synthetic` sets smpi/shared-malloc:global (docs/simulate.md).
    void* start = SMPI_SHARED_MALLOC(bytes);
    require(start != nullptr, "the synthetic arena: SMPI_SHARED_MALLOC of ", bytes, " bytes failed");
#else
    void* start = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    require(start != MAP_FAILED, "the synthetic arena: reserving ", bytes, " bytes of address space failed");
#endif
    return start;
  }

  mutable std::mutex mutex_;
  std::vector<Region> regions_;  // growing sizes; every one stays mapped (old tensors point into it)
};

// One arena per process: under SMPI every simulated rank's tensors share it (see the header).
SyntheticArena& process_arena() {
  static SyntheticArena arena;
  return arena;
}

}  // namespace

void* SyntheticAllocator::raw_allocate(std::size_t bytes) {
  constexpr std::size_t alignment = 64;
  const std::size_t rounded = std::max<std::size_t>(alignment, (bytes + alignment - 1) / alignment * alignment);
  void* pointer = std::aligned_alloc(alignment, rounded);
  if (pointer == nullptr) throw_error("host allocation of ", bytes, " bytes failed");
  return pointer;
}

void SyntheticAllocator::raw_release(void* pointer, std::size_t) { std::free(pointer); }

void* SyntheticAllocator::raw_allocate_in(std::size_t bytes, MemCategory category) {
  if (holds_values(category)) return raw_allocate(bytes);
  std::lock_guard lock(mutex_);
  const std::size_t size = aligned(bytes);
  const std::size_t offset = take_offsets(size);
  char* pointer = process_arena().region_holding(offset + size) + offset;
  offset_of_[pointer] = offset;
  return pointer;
}

void SyntheticAllocator::raw_release_in(void* pointer, std::size_t bytes, MemCategory category) {
  if (holds_values(category)) return raw_release(pointer, bytes);
  std::lock_guard lock(mutex_);
  const auto it = offset_of_.find(pointer);
  require(it != offset_of_.end(), "synthetic allocator: ", pointer, " was not allocated here");
  give_back_offsets(it->second, aligned(bytes));
  offset_of_.erase(it);
}

// First fit over the free ranges below end_, else from end_ on.
std::size_t SyntheticAllocator::take_offsets(std::size_t bytes) {
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < bytes) continue;
    const std::size_t offset = it->first, left = it->second - bytes;
    free_.erase(it);
    if (left > 0) free_.emplace(offset + bytes, left);
    return offset;
  }
  const std::size_t offset = end_;
  end_ += bytes;
  return offset;
}

// Merged with its free neighbours; a range that reaches end_ moves end_ back instead.
void SyntheticAllocator::give_back_offsets(std::size_t offset, std::size_t bytes) {
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + bytes == next->first) {
    bytes += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    const auto previous = std::prev(next);
    if (previous->first + previous->second == offset) {
      offset = previous->first;
      bytes += previous->second;
      free_.erase(previous);
    }
  }
  if (offset + bytes == end_)
    end_ = offset;
  else
    free_.emplace(offset, bytes);
}

std::size_t synthetic_arena_bytes() { return process_arena().bytes(); }

}  // namespace mdtp::simulate
