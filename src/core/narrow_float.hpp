#pragma once
// bf16 and f16 as 16-bit patterns, to and from double, for host code and CUDA kernels alike.  It
// needs no CUDA header, so the host test suite (tests/gpu/test_narrow_float.cpp) checks the very
// code the kernels run.
//
// Narrowing rounds once, to nearest with ties to even, from the double itself.  Going through
// float first (__float2bfloat16_rn(float(x))) rounds twice, and is wrong whenever the first
// rounding lands exactly on a midpoint of the 16-bit format: 1 + 2^-8 + 2^-30 lies above the
// bf16 midpoint between 1 and 1 + 2^-7 and must round up, but as a float it is that midpoint,
// which then ties to even, down to 1.
//
// Subnormals of the 16-bit format are produced (f16's matter: 2^-24 .. 2^-14); values from the
// largest finite value plus half an ulp upwards become infinity; NaN stays NaN (quiet, sign kept).
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define MDTP_HOST_DEVICE __host__ __device__
#else
#define MDTP_HOST_DEVICE
#endif

namespace mdtp::narrow {

// The two formats: IEEE binary16 layouts with these field widths (sign bit on top).
struct Bf16 {
  static constexpr int exponent_bits = 8, mantissa_bits = 7;
};
struct F16 {
  static constexpr int exponent_bits = 5, mantissa_bits = 10;
};

MDTP_HOST_DEVICE inline std::uint64_t bits_of(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<std::uint64_t>(__double_as_longlong(x));
#else
  std::uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
#endif
}

MDTP_HOST_DEVICE inline double double_of(std::uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(b));
#else
  double x;
  std::memcpy(&x, &b, sizeof x);
  return x;
#endif
}

// x rounded once to the format F (to nearest, ties to even), as its bit pattern.
template <class F>
MDTP_HOST_DEVICE inline std::uint16_t from_double(double x) {
  constexpr int M = F::mantissa_bits, E = F::exponent_bits;
  constexpr int bias = (1 << (E - 1)) - 1, emin = 1 - bias, all_ones = (1 << E) - 1;
  const std::uint64_t b = bits_of(x);
  const auto sign = static_cast<std::uint16_t>((b >> 63) << 15);
  const int exp = static_cast<int>((b >> 52) & 0x7ff);
  const std::uint64_t frac = b & ((std::uint64_t{1} << 52) - 1);
  if (exp == 0x7ff)  // infinity, or NaN (kept quiet)
    return static_cast<std::uint16_t>(sign | (all_ones << M) | (frac ? 1u << (M - 1) : 0u));
  if (exp == 0) return sign;  // zero or a double subnormal: far below half F's smallest subnormal
  const int e = exp - 1023;   // x = 1.frac · 2^e
  const std::uint64_t sig = (std::uint64_t{1} << 52) | frac;
  // Bits of sig below F's last place: its mantissa width, plus the denormalisation shift below
  // F's smallest normal exponent.
  const int shift = 52 - M + (e < emin ? emin - e : 0);
  if (shift > 63) return sign;  // rounds to zero (from shift 54 on already), and wider shifts are undefined
  std::uint64_t kept = sig >> shift;
  const std::uint64_t rest = sig & ((std::uint64_t{1} << shift) - 1), half = std::uint64_t{1} << (shift - 1);
  if (rest > half || (rest == half && (kept & 1))) ++kept;
  if (e < emin)  // subnormal; a carry into bit M is F's smallest normal, which this encodes too
    return static_cast<std::uint16_t>(sign | kept);
  int biased = e + bias;
  if (kept >> (M + 1)) {  // rounding carried into a new leading bit
    kept >>= 1;
    ++biased;
  }
  if (biased >= all_ones) return static_cast<std::uint16_t>(sign | (all_ones << M));  // overflow: infinity
  return static_cast<std::uint16_t>(sign | (static_cast<std::uint32_t>(biased) << M) |
                                    (kept & ((std::uint64_t{1} << M) - 1)));
}

// The exact value of a bit pattern of format F (every bf16 and f16 value is a double).
template <class F>
MDTP_HOST_DEVICE inline double to_double(std::uint16_t h) {
  constexpr int M = F::mantissa_bits, E = F::exponent_bits;
  constexpr int bias = (1 << (E - 1)) - 1, all_ones = (1 << E) - 1;
  const int exp = (h >> M) & all_ones;
  const std::uint64_t frac = h & ((1u << M) - 1);
  std::uint64_t bits;
  if (exp == all_ones) {
    bits = frac ? 0x7ff8000000000000ull : 0x7ff0000000000000ull;
  } else if (exp == 0) {  // subnormal: frac · 2^(1 - bias - M), an exact product of two doubles
    const double scale = double_of(static_cast<std::uint64_t>(1 - bias - M + 1023) << 52);
    bits = bits_of(static_cast<double>(frac) * scale);
  } else {  // the double with the same exponent and the mantissa bits moved up
    bits = (static_cast<std::uint64_t>(exp - bias + 1023) << 52) | (frac << (52 - M));
  }
  return double_of(bits | (static_cast<std::uint64_t>(h >> 15) << 63));
}

MDTP_HOST_DEVICE inline std::uint16_t bf16_from_double(double x) { return from_double<Bf16>(x); }
MDTP_HOST_DEVICE inline std::uint16_t f16_from_double(double x) { return from_double<F16>(x); }
MDTP_HOST_DEVICE inline double bf16_to_double(std::uint16_t h) { return to_double<Bf16>(h); }
MDTP_HOST_DEVICE inline double f16_to_double(std::uint16_t h) { return to_double<F16>(h); }

}  // namespace mdtp::narrow
