#include "cuda/device_of_pointer.hpp"

#include <cuda_runtime_api.h>

namespace mdtp {

int device_of_pointer(const void* p) {
  if (p == nullptr) return -1;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    (void)cudaGetLastError();  // an invalid pointer is an answer here, not a sticky error
    return -1;
  }
  return attributes.type == cudaMemoryTypeDevice ? attributes.device : -1;
}

void require_memory_of_device(const Tensor& t, int device, const std::string& who) {
  if (t.bytes() == 0) return;
  const int gpu = device_of_pointer(t.raw_data());
  if (gpu == device) return;
  if (gpu < 0) throw_error(who, " is not device memory; expected memory of GPU ", device, ", this rank's backend");
  throw_error(who, " is memory of GPU ", gpu, "; expected memory of GPU ", device, ", this rank's backend");
}

}  // namespace mdtp
