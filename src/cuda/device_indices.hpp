#pragma once
// int32 indices on the device (token ids, targets).  Tensor has no integer dtype, so they live in
// an accounted Storage of their own, from the backend's pool.
#include <cstdint>
#include <memory>
#include <span>

#include "core/tensor.hpp"
#include "cuda/cuda_backend.hpp"

namespace mdtp {

class DeviceIndices {
 public:
  DeviceIndices() = default;
  std::int64_t size() const { return size_; }
  const std::int32_t* data() const;  // null when empty

 private:
  friend DeviceIndices upload_indices(const CudaBackend&, std::span<const std::int32_t>, MemCategory);
  std::shared_ptr<Storage> storage_;
  std::int64_t size_ = 0;
};

// Enqueues the copy of `values` on the backend's stream.  `values` may be discarded on return
// (CUDA stages pageable sources before cudaMemcpyAsync returns); the indices are usable by any
// work enqueued after.
DeviceIndices upload_indices(const CudaBackend& backend, std::span<const std::int32_t> values,
                             MemCategory category = MemCategory::activations);

}  // namespace mdtp
