#pragma once
// Accounted allocation.  Every tensor's storage comes from an Allocator, which reports each
// allocation and release to its MemoryTracker under a category, so that experiments can report
// current and peak bytes per rank by category and compare them with the memory model.
// A tracker belongs to one rank's backend: there is no process-wide counter.
#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

#include "core/dtype.hpp"

namespace mdtp {

enum class MemCategory : std::uint8_t {
  parameters,
  gradients,
  optimizer_state,
  // The optimizer's own copy of the parameters where it differs from the compute copy (ZeRO
  // offload keeps it in host memory; mixed precision would keep it in f32).
  master_weights,
  activations,
  communication,
  // Scratch that lives only inside one backend call (a kernel's workspace, uploaded token ids):
  // apart so that per-category peaks agree between backends that need scratch and those that
  // do not.
  workspace,
  other,
};
inline constexpr std::size_t kMemCategoryCount = 8;
const char* mem_category_name(MemCategory category);

class MemoryTracker {
 public:
  void on_allocate(MemCategory category, std::size_t bytes);
  void on_release(MemCategory category, std::size_t bytes);

  std::int64_t current(MemCategory category) const;
  std::int64_t peak(MemCategory category) const;
  std::int64_t current_total() const;
  std::int64_t peak_total() const;  // peak of the sum, not the sum of peaks
  void reset_peaks();               // peaks restart from the current values
  // A second set of peaks over a window the caller opens (the trainer: its steps, after the
  // set-up's own peaks), leaving the run's peaks above untouched.
  void start_window();
  std::int64_t window_peak(MemCategory category) const;

 private:
  mutable std::mutex mutex_;  // the CUDA path frees from stream callbacks
  std::array<std::int64_t, kMemCategoryCount> current_{};
  std::array<std::int64_t, kMemCategoryCount> peak_{};
  std::array<std::int64_t, kMemCategoryCount> window_peak_{};
  std::int64_t current_total_ = 0;
  std::int64_t peak_total_ = 0;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual DeviceKind device() const = 0;
  // Returns storage of at least `bytes` bytes, 64-byte aligned; accounts it under `category`.
  void* allocate(std::size_t bytes, MemCategory category);
  void release(void* pointer, std::size_t bytes, MemCategory category);
  MemoryTracker& tracker() { return tracker_; }
  const MemoryTracker& tracker() const { return tracker_; }
  // Whether storage of this category holds values.  False only under a synthetic allocator
  // (simulate/synthetic_allocator.hpp: a simulated cluster's tensors of realistic size, whose
  // kernels are charged but not run): their bytes are accounted, their contents mean nothing.
  virtual bool holds_values(MemCategory) const { return true; }

 protected:
  virtual void* raw_allocate(std::size_t bytes) = 0;
  virtual void raw_release(void* pointer, std::size_t bytes) = 0;
  // What allocate() and release() call: by default the two above; an allocator that places
  // categories differently (the synthetic one) overrides these.
  virtual void* raw_allocate_in(std::size_t bytes, MemCategory) { return raw_allocate(bytes); }
  virtual void raw_release_in(void* pointer, std::size_t bytes, MemCategory) { raw_release(pointer, bytes); }

 private:
  MemoryTracker tracker_;
};

class HostAllocator final : public Allocator {
 public:
  DeviceKind device() const override { return DeviceKind::host; }

 protected:
  void* raw_allocate(std::size_t bytes) override;
  void raw_release(void* pointer, std::size_t bytes) override;
};

}  // namespace mdtp
