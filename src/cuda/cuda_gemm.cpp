// CudaBackend::do_gemm and the row-major cuBLAS mapping behind it (cuda_gemm.hpp explains it).
#include "cuda/cuda_gemm.hpp"

#include <climits>

#include "cuda/cuda_backend.hpp"
#include "cuda/cuda_check.hpp"

namespace mdtp {
namespace {

int as_blas_int(std::int64_t v, const char* what) {
  require(v >= 0 && v <= INT_MAX, "gemm: ", what, "=", v, " outside cuBLAS's 32-bit range [0, ", INT_MAX, "]");
  return static_cast<int>(v);
}

cudaDataType_t blas_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return CUDA_R_32F;
    case DType::f64: return CUDA_R_64F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f16: return CUDA_R_16F;
  }
  throw_error("gemm: unknown dtype code ", static_cast<int>(dtype));
}

}  // namespace

cublasMath_t gemm_math_mode(DType dtype, bool allow_tf32) {
  const int mode = dtype == DType::f32 && allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
  return static_cast<cublasMath_t>(mode | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
}

void gemm_rowmajor_into(cublasHandle_t handle, DType dtype, DType c_dtype, bool allow_tf32, bool ta, bool tb,
                        std::int64_t m, std::int64_t n, std::int64_t k, double alpha, GemmOperand a, GemmOperand b,
                        double beta, void* c, std::int64_t ldc, std::int64_t stride_c, std::int64_t batch) {
  const int M = as_blas_int(n, "n"), N = as_blas_int(m, "m"), K = as_blas_int(k, "k");
  const int lda = as_blas_int(a.ld, "lda"), ldb = as_blas_int(b.ld, "ldb"), ldc32 = as_blas_int(ldc, "ldc");
  const int count = as_blas_int(batch, "batch");
  const cublasOperation_t op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cudaDataType_t type = blas_type(dtype), c_type = blas_type(c_dtype);
  // Scalars have the compute type: double for f64, float otherwise.
  const float alpha32 = static_cast<float>(alpha), beta32 = static_cast<float>(beta);
  const bool wide = dtype == DType::f64;
  const void* pa = wide ? static_cast<const void*>(&alpha) : &alpha32;
  const void* pb = wide ? static_cast<const void*>(&beta) : &beta32;
  const cublasComputeType_t compute = wide ? CUBLAS_COMPUTE_64F
                                      : (dtype == DType::f32 && allow_tf32) ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                            : CUBLAS_COMPUTE_32F;
  MDTP_CUDA_CHECK(cublasSetMathMode(handle, gemm_math_mode(dtype, allow_tf32)));
  if (count == 1) {
    MDTP_CUDA_CHECK(cublasGemmEx(handle, op_b, op_a, M, N, K, pa, b.data, type, ldb, a.data, type, lda, pb, c, c_type,
                                 ldc32, compute, CUBLAS_GEMM_DEFAULT));
  } else {
    MDTP_CUDA_CHECK(cublasGemmStridedBatchedEx(handle, op_b, op_a, M, N, K, pa, b.data, type, ldb, b.stride, a.data,
                                               type, lda, a.stride, pb, c, c_type, ldc32, stride_c, count, compute,
                                               CUBLAS_GEMM_DEFAULT));
  }
}

void CudaBackend::do_gemm(bool ta, bool tb, double alpha, const Tensor& a, const Tensor& b, double beta,
                          Tensor& c) const {
  const std::int64_t m = ta ? a.cols() : a.rows(), k = ta ? a.rows() : a.cols();
  const std::int64_t n = tb ? b.rows() : b.cols();
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: C = beta C (beta == 0 overwrites, as on the host)
    if (beta == 0.0) fill(c, 0.0);
    else if (beta != 1.0) scale(c, beta);
    return;
  }
  // Leading dimensions of the row-major buffers are their column counts (at least 1 for cuBLAS).
  gemm_rowmajor_into(cublas(), a.dtype(), c.dtype(), allow_tf32(), ta, tb, m, n, k, alpha,
                     {a.raw_data(), std::max<std::int64_t>(1, a.cols())},
                {b.raw_data(), std::max<std::int64_t>(1, b.cols())}, beta, c.raw_data(), std::max<std::int64_t>(1, c.cols()));
}

}  // namespace mdtp
