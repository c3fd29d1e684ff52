#pragma once
// Kernel times on one GPU of a Cluster: the two physical limits of a kernel, nothing fitted per
// shape.
//
//   GEMM [m,k]·[k,n] (a roofline on arithmetic intensity, Williams et al. 2009):
//       t = max( 2mnk / (η_gemm · peak),  dtype·(mk + kn + mn) / (η_mem · B_hbm) )
//     A large GEMM runs at the sustained fraction η_gemm of the tensor-core peak; a thin one
//     (attention's per-head products with k or n = d_head, a small micro-batch) is limited by
//     reading its operands and writing its result, so its efficiency falls with its arithmetic
//     intensity mnk/(mk+kn+mn) below the ridge η_gemm·peak/(η_mem·B_hbm) flop/B.
//   Streaming kernels (LayerNorm, bias+GeLU, softmax, dropout, residual adds, the optimizer):
//       t = bytes read and written / (η_mem · B_hbm)
#include <cstdint>

#include "core/dtype.hpp"
#include "cost/cluster.hpp"

namespace mdtp::cost {

double gemm_roofline_seconds(std::int64_t m, std::int64_t n, std::int64_t k, DType dtype, const Cluster& cluster);
double stream_seconds(double bytes, const Cluster& cluster);

}  // namespace mdtp::cost
