#pragma once
// exp, tanh, log and cos over arrays, vectorised: the transcendental functions of the host
// kernels (GeLU's tanh, the softmax and cross-entropy exps) and of parameter initialisation
// (Box–Muller's log and cos).  With SLEEF (cmake/MdtpSleef.cmake) they are its _u10 functions —
// at most 1 ulp from the exact value, which the f64 tests' 1e-12 tolerances need — except f32
// tanh, which takes _u35 (3.5 ulp, 2.5x faster; only GeLU uses it, and f32 models are held to
// 1e-5).  Each runs at the widest vector this build was compiled for (AVX-512, AVX/AVX2 or SSE2;
// SLEEF picks the FMA variant at run time where the CPU has one); without SLEEF, libm one element
// at a time.
//
// Each result depends only on its element's value, never on the array's length or alignment: the
// tail that does not fill a vector goes through the same vector function, padded.  So a tensor
// sharded differently by another mode gets bitwise the same values.  y may alias x.
#include <cstdint>

namespace mdtp {

void array_exp(const float* x, float* y, std::int64_t n);
void array_exp(const double* x, double* y, std::int64_t n);
void array_tanh(const float* x, float* y, std::int64_t n);
void array_tanh(const double* x, double* y, std::int64_t n);
void array_log(const float* x, float* y, std::int64_t n);
void array_log(const double* x, double* y, std::int64_t n);
void array_cos(const float* x, float* y, std::int64_t n);
void array_cos(const double* x, double* y, std::int64_t n);

// "SLEEF 3.5.1 _u10, AVX (4 f64 / 8 f32 per call)" or "libm (scalar)".
const char* vector_math_name();

}  // namespace mdtp
