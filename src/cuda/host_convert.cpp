#include "cuda/host_convert.hpp"

#include <cstdint>
#include <cstring>

#include "core/error.hpp"
#include "cuda/narrow_float.hpp"

namespace mdtp {
namespace {

// Element access through memcpy: the buffers are often byte vectors (staging), which must not be
// read through a float* or uint16_t*.
template <class T>
T load(const void* p, std::size_t i) {
  T v;
  std::memcpy(&v, static_cast<const unsigned char*>(p) + i * sizeof(T), sizeof(T));
  return v;
}

template <class T>
void store(void* p, std::size_t i, T v) {
  std::memcpy(static_cast<unsigned char*>(p) + i * sizeof(T), &v, sizeof(T));
}

// Every dtype's values are doubles exactly, so reading through double loses nothing and the
// write below is the only rounding.
double read(DType type, const void* p, std::size_t i) {
  switch (type) {
    case DType::f32: return load<float>(p, i);
    case DType::f64: return load<double>(p, i);
    case DType::bf16: return narrow::bf16_to_double(load<std::uint16_t>(p, i));
    case DType::f16: return narrow::f16_to_double(load<std::uint16_t>(p, i));
  }
  throw_error("convert_host: unknown dtype code ", static_cast<int>(type));
}

void write(DType type, void* p, std::size_t i, double v) {
  switch (type) {
    case DType::f32: return store(p, i, static_cast<float>(v));  // one rounding, to nearest even
    case DType::f64: return store(p, i, v);
    case DType::bf16: return store(p, i, narrow::bf16_from_double(v));
    case DType::f16: return store(p, i, narrow::f16_from_double(v));
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
