#include "core/vector_math.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>

#ifdef MDTP_HAVE_SLEEF
#include <immintrin.h>
#include <sleef.h>
#endif

namespace mdtp {
namespace {

#ifdef MDTP_HAVE_SLEEF
#define MDTP_STR2(x) #x
#define MDTP_STR(x) MDTP_STR2(x)
#define MDTP_SLEEF_VERSION \
  MDTP_STR(SLEEF_VERSION_MAJOR) "." MDTP_STR(SLEEF_VERSION_MINOR) "." MDTP_STR(SLEEF_VERSION_PATCHLEVEL)

// One vector width per build, the widest its compiler flags allow (so a portable build never
// executes an instruction the CPU lacks).  SLEEF's functions without an ISA suffix dispatch at
// run time among the variants of that width (e.g. AVX vs AVX2+FMA for 256 bits).
#if defined(__AVX512F__)
struct F64 {
  using V = __m512d;
  static constexpr int width = 8;
  static V load(const double* p) { return _mm512_loadu_pd(p); }
  static void store(double* p, V v) { _mm512_storeu_pd(p, v); }
  static V exp(V v) { return Sleef_expd8_u10(v); }
  static V tanh(V v) { return Sleef_tanhd8_u10(v); }
  static V log(V v) { return Sleef_logd8_u10(v); }
  static V cos(V v) { return Sleef_cosd8_u10(v); }
};
struct F32 {
  using V = __m512;
  static constexpr int width = 16;
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V exp(V v) { return Sleef_expf16_u10(v); }
  static V tanh(V v) { return Sleef_tanhf16_u35(v); }
  static V log(V v) { return Sleef_logf16_u10(v); }
  static V cos(V v) { return Sleef_cosf16_u10(v); }
};
constexpr const char* kName = "SLEEF " MDTP_SLEEF_VERSION " _u10 (f32 tanh _u35), AVX-512 (8 f64 / 16 f32 per call)";
#elif defined(__AVX__)
struct F64 {
  using V = __m256d;
  static constexpr int width = 4;
  static V load(const double* p) { return _mm256_loadu_pd(p); }
  static void store(double* p, V v) { _mm256_storeu_pd(p, v); }
  static V exp(V v) { return Sleef_expd4_u10(v); }
  static V tanh(V v) { return Sleef_tanhd4_u10(v); }
  static V log(V v) { return Sleef_logd4_u10(v); }
  static V cos(V v) { return Sleef_cosd4_u10(v); }
};
struct F32 {
  using V = __m256;
  static constexpr int width = 8;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V exp(V v) { return Sleef_expf8_u10(v); }
  static V tanh(V v) { return Sleef_tanhf8_u35(v); }
  static V log(V v) { return Sleef_logf8_u10(v); }
  static V cos(V v) { return Sleef_cosf8_u10(v); }
};
constexpr const char* kName = "SLEEF " MDTP_SLEEF_VERSION " _u10 (f32 tanh _u35), AVX (4 f64 / 8 f32 per call)";
#else
struct F64 {
  using V = __m128d;
  static constexpr int width = 2;
  static V load(const double* p) { return _mm_loadu_pd(p); }
  static void store(double* p, V v) { _mm_storeu_pd(p, v); }
  static V exp(V v) { return Sleef_expd2_u10(v); }
  static V tanh(V v) { return Sleef_tanhd2_u10(v); }
  static V log(V v) { return Sleef_logd2_u10(v); }
  static V cos(V v) { return Sleef_cosd2_u10(v); }
};
struct F32 {
  using V = __m128;
  static constexpr int width = 4;
  static V load(const float* p) { return _mm_loadu_ps(p); }
  static void store(float* p, V v) { _mm_storeu_ps(p, v); }
  static V exp(V v) { return Sleef_expf4_u10(v); }
  static V tanh(V v) { return Sleef_tanhf4_u35(v); }
  static V log(V v) { return Sleef_logf4_u10(v); }
  static V cos(V v) { return Sleef_cosf4_u10(v); }
};
constexpr const char* kName = "SLEEF " MDTP_SLEEF_VERSION " _u10 (f32 tanh _u35), SSE2 (2 f64 / 4 f32 per call)";
#endif

// Applies F to whole vectors, then to the tail padded with ones (a value every function takes
// without raising a floating-point exception) through the same vector code.
template <class Ops, class T, class F>
void apply(const T* x, T* y, std::int64_t n, F f) {
  constexpr int w = Ops::width;
  std::int64_t i = 0;
  for (; i + w <= n; i += w) Ops::store(y + i, f(Ops::load(x + i)));
  if (i == n) return;
  alignas(64) T pad[w];
  std::fill(pad, pad + w, T(1));
  std::copy(x + i, x + n, pad);
  Ops::store(pad, f(Ops::load(pad)));
  std::copy(pad, pad + (n - i), y + i);
}

template <class T>
using OpsOf = std::conditional_t<std::is_same_v<T, float>, F32, F64>;

template <class T>
void vexp(const T* x, T* y, std::int64_t n) {
  apply<OpsOf<T>>(x, y, n, [](auto v) { return OpsOf<T>::exp(v); });
}
template <class T>
void vtanh(const T* x, T* y, std::int64_t n) {
  apply<OpsOf<T>>(x, y, n, [](auto v) { return OpsOf<T>::tanh(v); });
}
template <class T>
void vlog(const T* x, T* y, std::int64_t n) {
  apply<OpsOf<T>>(x, y, n, [](auto v) { return OpsOf<T>::log(v); });
}
template <class T>
void vcos(const T* x, T* y, std::int64_t n) {
  apply<OpsOf<T>>(x, y, n, [](auto v) { return OpsOf<T>::cos(v); });
}
#else
constexpr const char* kName = "libm (scalar)";

template <class T>
void vexp(const T* x, T* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}
template <class T>
void vtanh(const T* x, T* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
}
template <class T>
void vlog(const T* x, T* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = std::log(x[i]);
}
template <class T>
void vcos(const T* x, T* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = std::cos(x[i]);
}
#endif

}  // namespace

void array_exp(const float* x, float* y, std::int64_t n) { vexp(x, y, n); }
void array_exp(const double* x, double* y, std::int64_t n) { vexp(x, y, n); }
void array_tanh(const float* x, float* y, std::int64_t n) { vtanh(x, y, n); }
void array_tanh(const double* x, double* y, std::int64_t n) { vtanh(x, y, n); }
void array_log(const float* x, float* y, std::int64_t n) { vlog(x, y, n); }
void array_log(const double* x, double* y, std::int64_t n) { vlog(x, y, n); }
void array_cos(const float* x, float* y, std::int64_t n) { vcos(x, y, n); }
void array_cos(const double* x, double* y, std::int64_t n) { vcos(x, y, n); }

const char* vector_math_name() { return kName; }

}  // namespace mdtp
