#include "cuda/device_indices.hpp"

#include "cuda/cuda_check.hpp"

namespace mdtp {

const std::int32_t* DeviceIndices::data() const {
  return storage_ ? static_cast<const std::int32_t*>(storage_->data()) : nullptr;
}

DeviceIndices upload_indices(const CudaBackend& backend, std::span<const std::int32_t> values, MemCategory category) {
  DeviceIndices out;
  out.size_ = static_cast<std::int64_t>(values.size());
  if (values.empty()) return out;
  out.storage_ = std::make_shared<Storage>(backend.allocator_ptr(), values.size_bytes(), category);
  MDTP_CUDA_CHECK(cudaMemcpyAsync(out.storage_->data(), values.data(), values.size_bytes(), cudaMemcpyHostToDevice,
                                  backend.stream()));
  return out;
}

}  // namespace mdtp
