#pragma once
// Element types.  f32/f64 run everywhere; bf16/f16 are storage types of the CUDA path (fp32
// accumulation), and the host path refuses them with a clear error.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mdtp {

enum class DType : std::uint8_t { f32, f64, bf16, f16 };

std::size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);
DType parse_dtype(std::string_view name);  // "f32"|"float32"|"f64"|"float64"|"bf16"|"f16"

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return DType::f32; }
template <>
constexpr DType dtype_of<double>() { return DType::f64; }

enum class DeviceKind : std::uint8_t { host, cuda };
const char* device_name(DeviceKind device);

}  // namespace mdtp
