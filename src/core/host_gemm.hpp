#pragma once
// Row-major GEMM on host memory, with leading dimensions so that a layer can multiply sub-blocks
// in place (attention multiplies one head's column block of the fused QKV; transposed operands
// are read as they lie, never copied).  Two engines compute it:
//  - blas:  the CBLAS found at configure time (cmake/MdtpBlas.cmake), CblasRowMajor with
//           CblasTrans flags; used whenever it is linked and its kernels run on this CPU
//           (blas_library().usable);
//  - eigen: Eigen's own GEMM, the fallback, and the reference the tests hold the BLAS to.
#include <cstdint>

namespace mdtp {

enum class GemmEngine { blas, eigen };

const char* gemm_engine_name(GemmEngine engine);  // "blas", "eigen"
bool gemm_engine_available(GemmEngine engine);
// blas when available (the BLAS' thread count is set on this first call), else eigen.
GemmEngine default_gemm_engine();

// C[m×n] = alpha·op(A)·op(B) + beta·C.  op(A) is m×k: A is stored m×k (lda ≥ k), or k×m when
// transpose_a (lda ≥ m); likewise B (k×n, or n×k when transpose_b).  beta = 0 overwrites C (its
// old contents, NaN included, are not read).  C must not overlap A or B.  Sizes past the BLAS'
// 32-bit integers are refused with an mdtp::Error.
template <class T>
void host_gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha,
               const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc,
               GemmEngine engine = default_gemm_engine());

}  // namespace mdtp
