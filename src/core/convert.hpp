#pragma once
// Element conversion between the four dtypes on the host: the host backend's 16-bit storage (its
// kernels compute in f32 on widened copies), to_f64/assign_f64, checkpoints, and the staging of
// the CUDA path.  Narrowing rounds once, to nearest with ties to even, from the source value
// (core/narrow_float.hpp, which the CUDA kernels use too); widening is exact.
//
// The pairs a training step converts on every element take loops the compiler vectorises:
// bf16 <-> f32 (bf16 is the upper half of an f32: widening is a shift, narrowing an integer
// rounding), f16 <-> f32 (the F16C conversions where the build targets them, else the compiler's
// correctly rounded software ones) and f32 <-> f64.  Every other pair goes through double, which
// holds every value of every dtype exactly.  Both give the same bits (tests/core/test_narrow_float).
#include <cstddef>
#include <cstdint>

#include "core/dtype.hpp"

namespace mdtp {

// dst[i] = src[i] converted; src and dst are host buffers of `count` elements (any alignment; they
// must not overlap unless they are the same buffer of the same dtype).
void convert_host(DType src_type, const void* src, DType dst_type, void* dst, std::size_t count);

// The vectorised pairs, for kernels that widen 16-bit storage into f32 scratch and back.
void widen_to_f32(DType src_type, const void* src, float* dst, std::size_t count);
void narrow_from_f32(const float* src, DType dst_type, void* dst, std::size_t count);

// One f32 (as its bits) to bf16, rounded to nearest even; a NaN becomes the quiet NaN of its sign
// that narrow_float.hpp gives (0x7fc0), an overflow infinity.
inline std::uint16_t bf16_from_f32_bits(std::uint32_t bits) {
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>(((bits >> 16) & 0x8000u) | 0x7fc0u);
  return static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

}  // namespace mdtp
