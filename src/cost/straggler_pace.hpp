#pragma once
// The pace of a synchronous job: every step waits, at its collectives, for the slowest of its GPUs.
//
// The sustained tensor-core rate differs from GPU to GPU of one model (silicon, power and cooling:
// a matmul scan of one node loaded whole measured 4.5 % between its fastest and slowest of 8). Taken
// as normal across GPUs with relative standard deviation σ, the slowest of n GPUs runs, on average,
// at 1 − σ·E_n of the mean rate, where E_n is the expected maximum of n independent standard normal
// draws (E_1 = 0, E_2 = 1/√π, E_8 ≈ 1.424, E_1000 ≈ 3.241); the same law makes the expected spread
// of n GPUs 2·σ·E_n, which is how σ follows from a measured node.  A cluster's synchronous_pace is
// the pace of its slowest GPU in a loaded node of gpus_per_node; a job of n GPUs scales it by
// (1 − σ·E_n) / (1 − σ·E_node).
#include <cstdint>

namespace mdtp::cost {

// E_n: the expected maximum of n independent standard normal draws (n >= 1), by quadrature of
// x · n·φ(x)·Φ(x)^(n−1) (to about 1e-9).
double expected_normal_maximum(std::int64_t n);

// The pace of the slowest of `gpus` GPUs (>= 2), from the pace of the slowest of `node_gpus` and the
// relative spread σ of the per-GPU rate; at most 1.
double slowest_gpu_pace(double node_pace, double sigma, std::int64_t node_gpus, std::int64_t gpus);

}  // namespace mdtp::cost
