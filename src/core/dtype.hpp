#pragma once
// Element types.  f32 and f64 compute in themselves; bf16 and f16 are 16-bit storage types that
// every backend computes in f32 (host_low_precision.hpp, the CUDA kernels), rounding once to
// nearest even when it stores.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mdtp {

enum class DType : std::uint8_t { f32, f64, bf16, f16 };

std::size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);
DType parse_dtype(std::string_view name);  // "f32"|"float32"|"f64"|"float64"|"bf16"|"f16"

// bf16 and f16: stored in 16 bits, computed in f32.
constexpr bool is_16bit(DType dtype) { return dtype == DType::bf16 || dtype == DType::f16; }

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return DType::f32; }
template <>
constexpr DType dtype_of<double>() { return DType::f64; }

enum class DeviceKind : std::uint8_t { host, cuda };
const char* device_name(DeviceKind device);

}  // namespace mdtp
