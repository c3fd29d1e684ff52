#include "cuda/host_convert.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>

#include "core/error.hpp"

namespace mdtp {
namespace {

double read(DType type, const void* p, std::size_t i) {
  switch (type) {
    case DType::f32: return static_cast<const float*>(p)[i];
    case DType::f64: return static_cast<const double*>(p)[i];
    case DType::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case DType::f16: return __half2float(static_cast<const __half*>(p)[i]);
  }
  throw_error("convert_host: unknown dtype code ", static_cast<int>(type));
}

void write(DType type, void* p, std::size_t i, double v) {
  switch (type) {
    case DType::f32: static_cast<float*>(p)[i] = static_cast<float>(v); return;
    case DType::f64: static_cast<double*>(p)[i] = v; return;
    case DType::bf16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(static_cast<float>(v)); return;
    case DType::f16: static_cast<__half*>(p)[i] = __float2half_rn(static_cast<float>(v)); return;
  }
  throw_error("convert_host: unknown dtype code ", static_cast<int>(type));
}

}  // namespace

void convert_host(DType src_type, const void* src, DType dst_type, void* dst, std::size_t count) {
  if (src_type == dst_type) {
    if (count) std::memcpy(dst, src, count * dtype_size(src_type));
    return;
  }
  for (std::size_t i = 0; i < count; ++i) write(dst_type, dst, i, read(src_type, src, i));
}

}  // namespace mdtp
