#pragma once
// Host-side element conversion between the four dtypes (bf16/f16 with CUDA's round-to-nearest-
// even conversions), for host staging: to_f64/assign_f64 and the staged MPI communicator.
#include <cstddef>

#include "core/dtype.hpp"

namespace mdtp {

// dst[i] = src[i] converted; src and dst are host buffers of `count` elements.
void convert_host(DType src_type, const void* src, DType dst_type, void* dst, std::size_t count);

}  // namespace mdtp
