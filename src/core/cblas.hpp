#pragma once
// The CBLAS header of the BLAS the build linked (cmake/MdtpBlas.cmake sets MDTP_HAVE_CBLAS, and
// MDTP_CBLAS_MKL where that BLAS is MKL, whose header has its own name); nothing without one.
#ifdef MDTP_HAVE_CBLAS
#ifdef MDTP_CBLAS_MKL
#include <mkl_cblas.h>
#else
#include <cblas.h>
#endif
#endif
