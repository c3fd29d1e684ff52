#pragma once
// Host-side element conversion between the four dtypes, for host staging: to_f64/assign_f64 and
// the staged MPI communicator.  Narrowing rounds once, to nearest even, from the source value
// (narrow_float.hpp), as the kernels do.  Plain C++ (no CUDA header), so the host test suite
// tests it too (tests/gpu/test_narrow_float.cpp).
#include <cstddef>

#include "core/dtype.hpp"

namespace mdtp {

// dst[i] = src[i] converted; src and dst are host buffers of `count` elements (any alignment).
void convert_host(DType src_type, const void* src, DType dst_type, void* dst, std::size_t count);

}  // namespace mdtp
