#pragma once
// Which GPU a buffer lives on.  Tensor knows only its DeviceKind ("cuda"), not which GPU, and a
// device tensor of another backend would reach a communicator as readily as one of its own; NCCL
// (and the staged copies) must be handed memory of their own backend's GPU, so the communicators
// ask the driver during validation.
#include <string>

#include "core/tensor.hpp"

namespace mdtp {

// The CUDA device index of the allocation holding `p`, or -1 when `p` is not device memory
// (host memory, null, unregistered).  Cost: one cudaPointerGetAttributes, about a microsecond.
int device_of_pointer(const void* p);

// Throws unless `t` is empty or device memory of GPU `device`: "<who> is memory of GPU 1; expected
// memory of GPU 0, this rank's backend".
void require_memory_of_device(const Tensor& t, int device, const std::string& who);

}  // namespace mdtp
