#pragma once
// The host backend's bf16 and f16 operands: 16-bit storage, f32 arithmetic.  Each op widens its
// 16-bit operands into f32 scratch a block at a time (a few rows, a GEMM tile), runs on them the
// very f32 kernel the f32 path runs (host_gemm, host_elementwise, host_layernorm), and rounds what
// it writes back once, to nearest even (core/convert.hpp).  So a bf16 op is its f32 op on the
// stored values, rounded once at the end: what PyTorch's CPU kernels do for bf16 tensors.
//
// Mixed forms, for gradients kept wider than the parameters (mixed-precision training): a GEMM
// with 16-bit A and B may write an f32 C (the weight gradient), column sums of a 16-bit matrix may
// accumulate into f32 (a bias gradient), LayerNorm's backward may accumulate dγ and dβ in f32, and
// axpy may add a 16-bit x into an f32 y.
//
// The GEMM: no BLAS here computes in bf16 or f16 (Debian's OpenBLAS 0.3.21 exports no
// cblas_sbgemm; see docs/host-performance.md), so the 16-bit GEMM is the f32 GEMM of the BLAS on
// widened tiles: C is cut into blocks whose A rows and B columns fit kGemmScratchFloats, each block
// widened once per use and multiplied with one sgemm call; widening costs O(1/block) of the
// multiply.  The scratch is this object's (about 64 MiB at most), reused by every call; like a
// BLAS's or cuBLAS's own workspace it is not in the allocator's accounting.
#include <cstddef>
#include <vector>

#include "core/backend.hpp"

namespace mdtp {

class LowPrecisionOps {
 public:
  // The validated arguments of the Backend op of the same name, at least one 16-bit.
  void fill(Tensor& t, double value);
  void gemm(bool transpose_a, bool transpose_b, double alpha, const Tensor& a, const Tensor& b, double beta,
            Tensor& c);
  void axpy(double alpha, const Tensor& x, Tensor& y);
  void scale(Tensor& x, double alpha);
  void add_row_vector(Tensor& y, const Tensor& row);
  void column_sums(const Tensor& x, Tensor& out, double beta);
  double sum_squares(const Tensor& x);
  void gelu_forward(const Tensor& x, Tensor& y);
  void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx);
  void row_mean_m2(const Tensor& x, Tensor& stats);
  void layernorm_apply(const Tensor& x, const Tensor& mean_rstd, const Tensor& gamma, const Tensor& beta,
                       Tensor& xhat, Tensor& y);
  void layernorm_backward_sums(const Tensor& dy, const Tensor& xhat, const Tensor& gamma, Tensor& sums);
  void layernorm_backward(const Tensor& dy, const Tensor& xhat, const Tensor& gamma, const Tensor& mean_rstd,
                          const Tensor& sums, std::int64_t n, Tensor& dx, Tensor& dgamma, Tensor& dbeta);

  // The GEMM's scratch budget in floats (A block + B block + a 16-bit C's block).
  static constexpr std::int64_t kGemmScratchFloats = std::int64_t{16} << 20;

 private:
  // Scratch of at least `floats`, in `slot` (distinct slots are distinct buffers).
  float* scratch(int slot, std::size_t floats);
  std::vector<float> scratch_[4];
};

}  // namespace mdtp
