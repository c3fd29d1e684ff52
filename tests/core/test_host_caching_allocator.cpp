// The host backend's caching allocator: large blocks come back for the same size class, small
// ones and those past the cap go to the C library; accounting counts the bytes asked for.
#include <catch2/catch.hpp>
#include <cstdint>

#include "core/host_caching_allocator.hpp"

using namespace mdtp;

TEST_CASE("freed large blocks are reused by size class; accounting is unchanged", "[core][allocator]") {
  CachingHostAllocator a;
  const std::size_t big = 300 * 1024 + 7;
  void* p = a.allocate(big, MemCategory::activations);
  CHECK(reinterpret_cast<std::uintptr_t>(p) % 64 == 0);
  CHECK(a.tracker().current(MemCategory::activations) == static_cast<std::int64_t>(big));
  a.release(p, big, MemCategory::activations);
  CHECK(a.tracker().current(MemCategory::activations) == 0);
  CHECK(a.cached_bytes() >= big);
  // Same 4 KiB size class: the cached block; another class: a new one.
  void* q = a.allocate(big - 5, MemCategory::gradients);
  CHECK(q == p);
  CHECK(a.cached_bytes() == 0);
  void* r = a.allocate(big + 8192, MemCategory::gradients);
  CHECK(r != p);
  a.release(q, big - 5, MemCategory::gradients);
  a.release(r, big + 8192, MemCategory::gradients);
  CHECK(a.tracker().current_total() == 0);
  // Small blocks are not cached.
  const std::size_t before = a.cached_bytes();
  void* s = a.allocate(100, MemCategory::other);
  a.release(s, 100, MemCategory::other);
  CHECK(a.cached_bytes() == before);
}

TEST_CASE("the cache never holds more than its cap", "[core][allocator]") {
  CachingHostAllocator a;
  const std::size_t block = CachingHostAllocator::kMaxCachedBytes / 4 + 4096;
  std::vector<void*> blocks;
  for (int i = 0; i < 5; ++i) blocks.push_back(a.allocate(block, MemCategory::other));
  for (void* p : blocks) a.release(p, block, MemCategory::other);
  CHECK(a.cached_bytes() <= CachingHostAllocator::kMaxCachedBytes);
  CHECK(a.cached_bytes() == 3 * block);
}
