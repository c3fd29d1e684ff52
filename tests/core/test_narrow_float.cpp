// The bf16/f16 conversions (core/narrow_float.hpp, which the CUDA kernels use too, and convert_host
// with its vectorised f32 paths, which the host backend's 16-bit storage and host staging use)
// against a brute-force reference: the nearest value of the 16-bit format, ties to the even bit
// pattern, found by bisection over all its values.
//
// The cases that matter are doubles within a hair of a midpoint of the 16-bit format: as floats
// they become the midpoint itself, so converting through float (the old code) rounds twice and
// ties to even on the wrong side.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/convert.hpp"
#include "core/narrow_float.hpp"

using namespace mdtp;

namespace {

struct Format {
  const char* name;
  DType dtype;
  int exponent_bits, mantissa_bits;
  std::uint16_t (*from_double)(double);
  double (*to_double)(std::uint16_t);
};

const Format kBf16{"bf16", DType::bf16, 8, 7, narrow::bf16_from_double, narrow::bf16_to_double};
const Format kF16{"f16", DType::f16, 5, 10, narrow::f16_from_double, narrow::f16_to_double};

// The reference's own decoding (std::ldexp), independent of the code under test.
double decode(const Format& f, std::uint16_t h) {
  const int bias = (1 << (f.exponent_bits - 1)) - 1, all_ones = (1 << f.exponent_bits) - 1;
  const int exp = (h >> f.mantissa_bits) & all_ones;
  const int mant = h & ((1 << f.mantissa_bits) - 1);
  double v;
  if (exp == all_ones) v = mant ? std::numeric_limits<double>::quiet_NaN() : INFINITY;
  else if (exp == 0) v = std::ldexp(mant, 1 - bias - f.mantissa_bits);
  else v = std::ldexp((1 << f.mantissa_bits) + mant, exp - bias - f.mantissa_bits);
  return (h & 0x8000) ? -v : v;
}

std::uint16_t infinity_bits(const Format& f) {
  return static_cast<std::uint16_t>(((1 << f.exponent_bits) - 1) << f.mantissa_bits);
}

// Nearest value to x, ties to the even pattern.  Non-negative patterns are ordered like their
// values, and the "value" of infinity here is 2^(emax+1), the next power of two past the largest
// finite value, as IEEE's overflow rule has it.  Midpoints of two 16-bit values are exact doubles,
// so the comparisons are exact.
std::uint16_t reference(const Format& f, double x) {
  if (std::isnan(x)) return static_cast<std::uint16_t>(infinity_bits(f) | 1);
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::abs(x);
  const std::uint16_t inf = infinity_bits(f);
  auto value = [&](std::uint16_t h) {
    return h == inf ? std::ldexp(1.0, (1 << (f.exponent_bits - 1))) : decode(f, h);
  };
  if (a >= value(inf)) return sign | inf;
  std::uint16_t lo = 0, hi = inf;  // value(lo) <= a < value(hi)
  while (hi - lo > 1) {
    const auto mid = static_cast<std::uint16_t>((lo + hi) / 2);
    (value(mid) <= a ? lo : hi) = mid;
  }
  const double midpoint = (value(lo) + value(hi)) / 2;
  std::uint16_t r = a < midpoint ? lo : a > midpoint ? hi : (lo % 2 == 0 ? lo : hi);
  return static_cast<std::uint16_t>(sign | r);
}

bool is_nan(const Format& f, std::uint16_t h) {
  return (h & infinity_bits(f)) == infinity_bits(f) && (h & ((1 << f.mantissa_bits) - 1)) != 0;
}

// What the old code did: round to float, then from that float to the 16-bit format.
std::uint16_t through_float(const Format& f, double x) { return f.from_double(static_cast<float>(x)); }

void check_conversion(const Format& f, double x) {
  const std::uint16_t want = reference(f, x), got = f.from_double(x);
  INFO(f.name << " of " << x << " (" << std::hexfloat << x << std::defaultfloat << ")");
  if (is_nan(f, want)) CHECK(is_nan(f, got));
  else CHECK(got == want);
}

}  // namespace

TEST_CASE("bf16/f16: every pattern decodes exactly and encodes back", "[narrow]") {
  for (const Format* f : {&kBf16, &kF16}) {
    INFO(f->name);
    for (std::uint32_t h = 0; h <= 0xffff; ++h) {
      const auto p = static_cast<std::uint16_t>(h);
      const double v = f->to_double(p);
      if (is_nan(*f, p)) {
        CHECK(std::isnan(v));
        CHECK(is_nan(*f, f->from_double(v)));
        continue;
      }
      const double want = decode(*f, p);
      REQUIRE(std::memcmp(&v, &want, sizeof v) == 0);  // bit for bit: -0 too
      REQUIRE(f->from_double(v) == p);
    }
  }
}

TEST_CASE("bf16/f16: one rounding near every kind of midpoint", "[narrow]") {
  std::mt19937_64 gen(7);
  for (const Format* f : {&kBf16, &kF16}) {
    INFO(f->name);
    const std::uint16_t inf = infinity_bits(*f);
    int exposed = 0;  // cases where rounding through float gives another answer
    for (int n = 0; n < 20000; ++n) {
      // A random finite non-negative pattern below the largest, its successor and their midpoint.
      const auto p = static_cast<std::uint16_t>(gen() % (inf - 1));
      const double lo = decode(*f, p), hi = decode(*f, static_cast<std::uint16_t>(p + 1));
      const double mid = (lo + hi) / 2;
      for (double sign : {1.0, -1.0})
        for (double x : {mid, std::nextafter(mid, INFINITY), std::nextafter(mid, -INFINITY),
                         std::nextafter(lo, INFINITY), std::nextafter(hi, 0.0)}) {
          check_conversion(*f, sign * x);
          exposed += through_float(*f, sign * x) != reference(*f, sign * x);
        }
    }
    // Just past a midpoint whose lower neighbour is even, the float is the midpoint itself: half
    // of the nextafter cases above round twice to the wrong side.
    CHECK(exposed > 10000);
  }
  // The example of narrow_float.hpp, spelled out.
  const double x = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  CHECK(narrow::bf16_from_double(x) == 0x3f81);  // 1 + 2^-7
  CHECK(through_float(kBf16, x) == 0x3f80);      // 1: what the old conversion gave
  const double y = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  CHECK(narrow::f16_from_double(y) == 0x3c01);  // 1 + 2^-10
  CHECK(through_float(kF16, y) == 0x3c00);
}

TEST_CASE("bf16/f16: random doubles over the whole range, and the edges", "[narrow]") {
  std::mt19937_64 gen(11);
  std::uniform_int_distribution<int> exponent(-160, 140);
  std::uniform_real_distribution<double> mantissa(1.0, 2.0);
  for (const Format* f : {&kBf16, &kF16}) {
    INFO(f->name);
    for (int n = 0; n < 200000; ++n) {
      const double x = std::ldexp(mantissa(gen), exponent(gen)) * ((n & 1) ? -1.0 : 1.0);
      check_conversion(*f, x);
    }
    const int bias = (1 << (f->exponent_bits - 1)) - 1;
    const double max = decode(*f, static_cast<std::uint16_t>(infinity_bits(*f) - 1));
    const double half_ulp_of_max = std::ldexp(1.0, bias - f->mantissa_bits - 1);
    const double min_sub = std::ldexp(1.0, 1 - bias - f->mantissa_bits);
    for (double x : {0.0, -0.0, 1.0, -2.5, max, -max, max + half_ulp_of_max, std::nextafter(max + half_ulp_of_max, 0.0),
                     1e300, -1e300, double(INFINITY), -double(INFINITY), std::numeric_limits<double>::quiet_NaN(),
                     min_sub, min_sub / 2, std::nextafter(min_sub / 2, 1.0), min_sub * 1.5, min_sub * 2.5,
                     std::numeric_limits<double>::denorm_min(), -std::numeric_limits<double>::min()})
      check_conversion(*f, x);
    CHECK(f->from_double(max + half_ulp_of_max) == infinity_bits(*f));  // the tie goes to infinity
    CHECK(f->from_double(min_sub / 2) == 0);                             // the tie goes to zero
    CHECK(f->from_double(-0.0) == 0x8000);
  }
  CHECK(narrow::f16_from_double(65504.0) == 0x7bff);  // f16's largest
  CHECK(narrow::f16_from_double(65520.0) == 0x7c00);  // + half an ulp: infinity
}

TEST_CASE("convert_host: single rounding between all four dtypes, any alignment", "[narrow]") {
  std::mt19937_64 gen(13);
  std::uniform_real_distribution<double> dist(-70000.0, 70000.0);
  std::vector<double> values(4096);
  for (auto& v : values) v = dist(gen);
  // Near-midpoint values of both formats, which rounding through float gets wrong.
  values[0] = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  values[1] = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  const std::size_t n = values.size();
  for (const Format* f : {&kBf16, &kF16}) {
    INFO(f->name);
    // Unaligned on purpose: staging buffers are byte vectors.
    std::vector<unsigned char> narrow_buf(2 * n + 1), wide_buf(8 * n + 1), float_buf(4 * n + 1);
    convert_host(DType::f64, values.data(), f->dtype, narrow_buf.data() + 1, n);
    std::vector<double> back(n);
    convert_host(f->dtype, narrow_buf.data() + 1, DType::f64, wide_buf.data() + 1, n);
    std::memcpy(back.data(), wide_buf.data() + 1, 8 * n);
    for (std::size_t i = 0; i < n; ++i) {
      std::uint16_t h;
      std::memcpy(&h, narrow_buf.data() + 1 + 2 * i, 2);
      REQUIRE(h == reference(*f, values[i]));
      REQUIRE(back[i] == decode(*f, h));
    }
    // f32 -> 16-bit: a float is a double exactly, so one rounding from the float.
    std::vector<float> floats(n);
    for (std::size_t i = 0; i < n; ++i) floats[i] = static_cast<float>(values[i]);
    convert_host(DType::f32, floats.data(), f->dtype, narrow_buf.data() + 1, n);
    for (std::size_t i = 0; i < n; ++i) {
      std::uint16_t h;
      std::memcpy(&h, narrow_buf.data() + 1 + 2 * i, 2);
      REQUIRE(h == reference(*f, floats[i]));
    }
    // 16-bit -> f32 is exact.
    convert_host(f->dtype, narrow_buf.data() + 1, DType::f32, float_buf.data() + 1, n);
    for (std::size_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, float_buf.data() + 1 + 4 * i, 4);
      REQUIRE(static_cast<double>(v) == decode(*f, reference(*f, floats[i])));
    }
  }
  // bf16 <-> f16: through the exact value, one rounding.
  std::vector<std::uint16_t> f16(n), bf16(n);
  for (std::size_t i = 0; i < n; ++i) f16[i] = reference(kF16, values[i] / 1024);
  convert_host(DType::f16, f16.data(), DType::bf16, bf16.data(), n);
  for (std::size_t i = 0; i < n; ++i) REQUIRE(bf16[i] == reference(kBf16, decode(kF16, f16[i])));
  convert_host(DType::bf16, bf16.data(), DType::f16, f16.data(), n);
  for (std::size_t i = 0; i < n; ++i) REQUIRE(f16[i] == reference(kF16, decode(kBf16, bf16[i])));
}

// The vectorised f32 <-> 16-bit loops against the one-rounding reference from the double: every
// bf16 high half with the low halves that decide rounding (ties, just below and above), every f16
// midpoint and its neighbours, a stride through all 2^32 float patterns, NaNs and infinities.
TEST_CASE("widen_to_f32 / narrow_from_f32: the vectorised paths give the reference's bits", "[narrow]") {
  std::vector<std::uint32_t> patterns;
  for (std::uint32_t hi = 0; hi < 0x10000u; ++hi)
    for (std::uint32_t lo : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) patterns.push_back(hi << 16 | lo);
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {  // f16 midpoints between h and h + 1, as floats
    const double a = narrow::f16_to_double(static_cast<std::uint16_t>(h));
    const double b = narrow::f16_to_double(static_cast<std::uint16_t>(h + 1));
    if (!std::isfinite(a) || !std::isfinite(b) || std::signbit(a) != std::signbit(b)) continue;
    const float mid = static_cast<float>((a + b) / 2);
    for (float f : {mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)}) {
      std::uint32_t bits;
      std::memcpy(&bits, &f, 4);
      patterns.push_back(bits);
    }
  }
  for (std::uint64_t b = 0; b < (1ull << 32); b += 4099) patterns.push_back(static_cast<std::uint32_t>(b));
  std::vector<float> floats(patterns.size());
  std::memcpy(floats.data(), patterns.data(), 4 * patterns.size());
  for (const Format* f : {&kBf16, &kF16}) {
    INFO(f->name);
    std::vector<std::uint16_t> narrow_bits(floats.size());
    narrow_from_f32(floats.data(), f->dtype, narrow_bits.data(), floats.size());
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < floats.size(); ++i) {
      const std::uint16_t want = f->from_double(static_cast<double>(floats[i]));
      if (narrow_bits[i] != want && wrong++ < 5)
        FAIL_CHECK("0x" << std::hex << patterns[i] << " -> 0x" << narrow_bits[i] << ", expected 0x" << want);
    }
    CHECK(wrong == 0);
    // Widening every 16-bit pattern is exact (NaNs stay NaNs).
    std::vector<std::uint16_t> all(0x10000);
    for (std::uint32_t h = 0; h < 0x10000u; ++h) all[h] = static_cast<std::uint16_t>(h);
    std::vector<float> wide(all.size());
    widen_to_f32(f->dtype, all.data(), wide.data(), all.size());
    for (std::uint32_t h = 0; h < 0x10000u; ++h) {
      const double want = f->to_double(static_cast<std::uint16_t>(h));
      if (std::isnan(want)) REQUIRE(std::isnan(wide[h]));
      else REQUIRE(static_cast<double>(wide[h]) == want);
    }
  }
}
