#pragma once
// Row-major (strided-batched) GEMM on cuBLAS, the one place that maps row-major operands onto
// column-major cuBLAS: a row-major m x n matrix is the column-major n x m matrix of its
// transpose, so instead of C = op(A)·op(B) cuBLAS computes Cᵀ = op(B)ᵀ·op(A)ᵀ with B's buffer
// passed first.  A row-major operand that is not transposed is already the transpose cuBLAS
// wants (CUBLAS_OP_N), a transposed one gets CUBLAS_OP_T.  No copies.
#include <cublas_v2.h>

#include <cstdint>

#include "core/dtype.hpp"

namespace mdtp {

// A row-major operand: `ld` is its row stride, `stride` the distance between batch entries
// (both in elements).
struct GemmOperand {
  const void* data;
  std::int64_t ld;
  std::int64_t stride = 0;
};

// The cuBLAS math mode of a GEMM: CUBLAS_TF32_TENSOR_OP_MATH only for f32 with allow_tf32,
// CUBLAS_DEFAULT_MATH otherwise (which never trades mantissa bits for speed, so no TF32), both
// with CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION (split-K partial sums of bf16/f16 GEMMs
// stay f32 instead of being reduced in the output type).
cublasMath_t gemm_math_mode(DType dtype, bool allow_tf32);

// For b < batch: C_b = alpha·op(A_b)·op(B_b) + beta·C_b, op(A_b) m x k, op(B_b) k x n.  f64
// computes in f64; f32 in f32 (TF32 tensor cores when allow_tf32); bf16/f16 accumulate in f32.
// The handle's math mode is set to gemm_math_mode first, on every call: the handle is public
// (CudaBackend::cublas()), and whatever else set it must not decide these numerics.
// beta == 0 never reads C.  Requires m, n, k >= 1.
// C has `c_dtype`: A and B's dtype, or f32 when they are bf16/f16 (a weight gradient kept in f32).
void gemm_rowmajor_into(cublasHandle_t handle, DType dtype, DType c_dtype, bool allow_tf32, bool transpose_a,
                        bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, GemmOperand a,
                        GemmOperand b, double beta, void* c, std::int64_t ldc, std::int64_t stride_c = 0,
                        std::int64_t batch = 1);

// C of A and B's dtype.
inline void gemm_rowmajor(cublasHandle_t handle, DType dtype, bool allow_tf32, bool transpose_a, bool transpose_b,
                          std::int64_t m, std::int64_t n, std::int64_t k, double alpha, GemmOperand a, GemmOperand b,
                          double beta, void* c, std::int64_t ldc, std::int64_t stride_c = 0, std::int64_t batch = 1) {
  gemm_rowmajor_into(handle, dtype, dtype, allow_tf32, transpose_a, transpose_b, m, n, k, alpha, a, b, beta, c, ldc,
                     stride_c, batch);
}

}  // namespace mdtp
