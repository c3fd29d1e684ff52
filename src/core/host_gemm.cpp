#include "core/host_gemm.hpp"

#include "core/eigen_core.hpp"  // before the other headers: see there

#include <algorithm>
#include <limits>

#include "core/blas_library.hpp"
#include "core/cblas.hpp"
#include "core/error.hpp"

namespace mdtp {
namespace {

template <class T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ConstBlock = Eigen::Map<const RowMatrix<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T>
using Block = Eigen::Map<RowMatrix<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

// C += alpha·op(A)·op(B).
template <class T>
void eigen_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
                std::int64_t lda, const T* b, std::int64_t ldb, T* c, std::int64_t ldc) {
  const ConstBlock<T> A(a, ta ? k : m, ta ? m : k, Eigen::OuterStride<>(lda));
  const ConstBlock<T> B(b, tb ? n : k, tb ? k : n, Eigen::OuterStride<>(ldb));
  Block<T> C(c, m, n, Eigen::OuterStride<>(ldc));
  if (!ta && !tb) C.noalias() += alpha * A * B;
  else if (ta && !tb) C.noalias() += alpha * A.transpose() * B;
  else if (!ta && tb) C.noalias() += alpha * A * B.transpose();
  else C.noalias() += alpha * A.transpose() * B.transpose();
}

#ifdef MDTP_HAVE_CBLAS
void cblas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha, const float* a, int lda,
                const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void cblas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, double alpha, const double* a, int lda,
                const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
#endif

// C = beta·C over an m×n block (beta = 0 writes zeros, whatever C held).
template <class T>
void scale_block(std::int64_t m, std::int64_t n, T beta, T* c, std::int64_t ldc) {
  Block<T> C(c, m, n, Eigen::OuterStride<>(ldc));
  if (beta == T(0)) C.setZero();
  else if (beta != T(1)) C *= beta;
}

}  // namespace

const char* gemm_engine_name(GemmEngine engine) { return engine == GemmEngine::blas ? "blas" : "eigen"; }

bool gemm_engine_available(GemmEngine engine) { return engine == GemmEngine::eigen || blas_library().usable; }

GemmEngine default_gemm_engine() {
  static const GemmEngine engine = blas_library().usable ? GemmEngine::blas : GemmEngine::eigen;
  return engine;
}

template <class T>
void host_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
               std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc, GemmEngine engine) {
  if (m == 0 || n == 0) return;
  // No product to add (the BLAS would also refuse the 0 leading dimensions of empty operands).
  if (k == 0 || alpha == T(0)) return scale_block(m, n, beta, c, ldc);
  if (engine == GemmEngine::eigen) {
    scale_block(m, n, beta, c, ldc);
    return eigen_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, c, ldc);
  }
#ifdef MDTP_HAVE_CBLAS
  require(gemm_engine_available(GemmEngine::blas), "host_gemm: the BLAS engine cannot run here (",
          blas_library().note, ")");
  constexpr std::int64_t limit = std::numeric_limits<int>::max();
  require(std::max({m, n, k, lda, ldb, ldc}) <= limit, "host_gemm: ", m, "x", n, "x", k,
          " (leading dimensions ", lda, ", ", ldb, ", ", ldc, ") exceeds the BLAS' 32-bit sizes");
  cblas_gemm(ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
             static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb),
             beta, c, static_cast<int>(ldc));
#else
  throw_error("host_gemm: mdtp was built without a BLAS (MDTP_BLAS=OFF or none found); use the eigen engine");
#endif
}

template void host_gemm<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const float*,
                               std::int64_t, const float*, std::int64_t, float, float*, std::int64_t, GemmEngine);
template void host_gemm<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, double, const double*,
                                std::int64_t, const double*, std::int64_t, double, double*, std::int64_t, GemmEngine);

}  // namespace mdtp
