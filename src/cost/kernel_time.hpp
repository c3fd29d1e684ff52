#pragma once
// Kernel times on one GPU of a Cluster, from the GPU's data sheet and a microbenchmark of its GEMM,
// nothing fitted to a training run.
//
//   GEMM [m,k]·[k,n], one kernel (the way cuBLAS runs it on a GPU of S streaming multiprocessors):
//     the output is cut into tiles of Tm×Tn, one thread block per tile, S blocks at a time, so the
//     kernel runs ⌈⌈m/Tm⌉·⌈n/Tn⌉ / S⌉ waves, each as long as one tile's 2·Tm·Tn·k flops at the
//     SM's share of the sustained rate (tile and wave quantisation: a GEMM with S + 1 tiles takes
//     two waves).  The library picks the tile that finishes first among 256×128, 128×256 and
//     128×128 at the full rate and 128×64, 64×128 and 64×64 at a rate lowered by their operand
//     reuse (a Tm×Tn tile loads (Tm+Tn)/(Tm·Tn) operand elements per multiply-add: half the tile,
//     twice the loads per flop), so small problems use small tiles and large ones large tiles.
//     With fewer tiles than SMs it may also split k (split-K: s slices of at least 256 run as
//     separate tiles, their f32 partial sums written and read once more), as the libraries do to
//     fill the GPU.
//     Each wave ends with its tiles' outputs (Tm·Tn·δ per SM) written at the streaming bandwidth
//     before the next wave's main loops start: min(tiles, S)·Tm·Tn·δ / (η_mem · B_hbm) per wave, a
//     fixed cost that weighs most where k is short (XLA's published H100 GEMM timings show it:
//     2.7 µs per wave of 128×256 bf16 tiles, where 132 such tiles take 3.0 µs to write at 85 % of
//     3.35 TB/s).  The microbenchmark that gives η_gemm timed its best shape whole, so the main loop
//     runs at the rate that makes that shape, epilogues included, take its measured time.
//     A thin GEMM (attention's per-head products, a small micro-batch) is limited instead by
//     reading its operands and writing its result at the streaming bandwidth (a roofline,
//     Williams et al. 2009):
//       t = max( waves · (2·Tm·Tn·k / (r_main / S) + epilogue),  δ·(mk + kn + mn) / (η_mem · B_hbm) )
//           + the per-kernel overhead
//     η_gemm is the fraction of the data-sheet peak the best-shaped large GEMM reaches in a
//     microbenchmark (the cluster file names it); a cluster without an SM count (a calibrated or
//     host cluster) keeps the roofline alone at its measured rate.  The microbenchmark ran one
//     GPU with its node idle; a synchronous step waits at every collective for the slowest GPU of
//     a node whose GPUs all run, so r_main is scaled by the cluster's synchronous_pace.
//   Streaming kernels (LayerNorm, bias+GeLU, softmax, dropout, residual adds, the optimizer):
//       t = bytes read and written / (η_mem · B_hbm) + kernels · the per-kernel overhead
#include <cstdint>

#include "core/dtype.hpp"
#include "cost/cluster.hpp"

namespace mdtp::cost {

// The bytes a GEMM's epilogue moves per output element: the result written in the output's
// dtype and, when the GEMM accumulates into it (C = A·B + C: a weight gradient added into its
// buffer), the old value read first.
double epilogue_bytes(DType output, bool accumulate);

// One cuBLAS-style GEMM kernel [m,k]·[k,n] (header comment) of operands in `dtype`; `batch` > 1 is
// one strided-batched kernel of that many independent products (attention's per-head products),
// whose tiles share the waves.  output_bytes: what its epilogue moves per output element
// (epilogue_bytes); 0: the result written in `dtype`.
double gemm_kernel_seconds(std::int64_t m, std::int64_t n, std::int64_t k, DType dtype, const Cluster& cluster,
                           std::int64_t batch = 1, double output_bytes = 0.0);
// The tile-and-wave compute time of those products alone, without their HBM traffic or the
// kernel's overhead: the matmuls inside a fused kernel (a streaming attention kernel's, whose
// operands stay on chip).
double gemm_compute_seconds(std::int64_t m, std::int64_t n, std::int64_t k, DType dtype, const Cluster& cluster,
                            std::int64_t batch = 1, double output_bytes = 0.0);
// The rate of the tile model's main loops (flop/s): the microbenchmark's rate, raised by what its
// reference shape's epilogues took (Cluster::gemm_reference_shape); the measured rate itself where
// the cluster names no reference shape or has no SM count; either times Cluster::synchronous_pace.
double gemm_mainloop_rate(DType dtype, const Cluster& cluster);
// `kernels` streaming kernels that together read and write `bytes`.
double stream_seconds(double bytes, const Cluster& cluster, int kernels = 1);

}  // namespace mdtp::cost
