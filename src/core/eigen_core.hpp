#pragma once
// <Eigen/Core> for mdtp's host kernels: every file that uses Eigen includes it through here, as
// its first include.
//
// GCC 12 warns -Wmaybe-uninitialized inside its own AVX-512 intrinsics (their _mm512_undefined_*
// operands; GCC bug 105593, fixed in GCC 13) wherever Eigen's AVX-512 packets are inlined, which a
// -march=native build on an AVX-512 CPU does.  The warning is located in the intrinsics header, so
// silencing it for the lines of the headers included here (not for any code of mdtp's) is enough.
// That needs this to be where the intrinsics header is first included: include this before any
// other header that might include it (in practice right after a file's own header).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
