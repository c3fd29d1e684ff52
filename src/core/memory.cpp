#include "core/memory.hpp"

#include <algorithm>
#include <cstdlib>
#include <new>

#include "core/error.hpp"

namespace mdtp {

const char* mem_category_name(MemCategory category) {
  switch (category) {
    case MemCategory::parameters: return "parameters";
    case MemCategory::gradients: return "gradients";
    case MemCategory::optimizer_state: return "optimizer_state";
    case MemCategory::master_weights: return "master_weights";
    case MemCategory::activations: return "activations";
    case MemCategory::communication: return "communication";
    case MemCategory::workspace: return "workspace";
    case MemCategory::other: return "other";
  }
  return "?";
}

void MemoryTracker::on_allocate(MemCategory category, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  auto i = static_cast<std::size_t>(category);
  current_[i] += static_cast<std::int64_t>(bytes);
  peak_[i] = std::max(peak_[i], current_[i]);
  window_peak_[i] = std::max(window_peak_[i], current_[i]);
  current_total_ += static_cast<std::int64_t>(bytes);
  peak_total_ = std::max(peak_total_, current_total_);
}

void MemoryTracker::on_release(MemCategory category, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  current_[static_cast<std::size_t>(category)] -= static_cast<std::int64_t>(bytes);
  current_total_ -= static_cast<std::int64_t>(bytes);
}

std::int64_t MemoryTracker::current(MemCategory category) const {
  std::lock_guard lock(mutex_);
  return current_[static_cast<std::size_t>(category)];
}
std::int64_t MemoryTracker::peak(MemCategory category) const {
  std::lock_guard lock(mutex_);
  return peak_[static_cast<std::size_t>(category)];
}
std::int64_t MemoryTracker::current_total() const {
  std::lock_guard lock(mutex_);
  return current_total_;
}
std::int64_t MemoryTracker::peak_total() const {
  std::lock_guard lock(mutex_);
  return peak_total_;
}
void MemoryTracker::start_window() {
  std::lock_guard lock(mutex_);
  window_peak_ = current_;
}
std::int64_t MemoryTracker::window_peak(MemCategory category) const {
  std::lock_guard lock(mutex_);
  return window_peak_[static_cast<std::size_t>(category)];
}
void MemoryTracker::reset_peaks() {
  std::lock_guard lock(mutex_);
  peak_ = current_;
  peak_total_ = current_total_;
}

void* Allocator::allocate(std::size_t bytes, MemCategory category) {
  void* pointer = raw_allocate_in(bytes, category);
  tracker_.on_allocate(category, bytes);
  return pointer;
}

void Allocator::release(void* pointer, std::size_t bytes, MemCategory category) {
  if (pointer == nullptr) return;
  raw_release_in(pointer, bytes, category);
  tracker_.on_release(category, bytes);
}

void* HostAllocator::raw_allocate(std::size_t bytes) {
  constexpr std::size_t alignment = 64;
  std::size_t rounded = std::max<std::size_t>(alignment, (bytes + alignment - 1) / alignment * alignment);
  void* pointer = std::aligned_alloc(alignment, rounded);
  if (pointer == nullptr) throw_error("host allocation of ", bytes, " bytes failed");
  return pointer;
}

void HostAllocator::raw_release(void* pointer, std::size_t) { std::free(pointer); }

}  // namespace mdtp
