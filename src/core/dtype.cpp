#include "core/dtype.hpp"

#include "core/error.hpp"

namespace mdtp {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::bf16: return 2;
    case DType::f16: return 2;
  }
  throw_error("unknown dtype code ", static_cast<int>(dtype));
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  if (name == "f32" || name == "float32" || name == "fp32") return DType::f32;
  if (name == "f64" || name == "float64" || name == "fp64") return DType::f64;
  if (name == "bf16" || name == "bfloat16") return DType::bf16;
  if (name == "f16" || name == "float16" || name == "fp16") return DType::f16;
  throw_error("unknown dtype '", name, "'; expected one of f32, f64, bf16, f16");
}

const char* device_name(DeviceKind device) { return device == DeviceKind::host ? "host" : "cuda"; }

}  // namespace mdtp
