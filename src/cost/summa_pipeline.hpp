#pragma once
// SUMMA's block products as mdtp's engine runs them (tp2d/summa.cpp), for 2D and 2.5D: each of a
// product's q steps needs a block broadcast (and, for dX = dY·Wᵀ and dW += Xᵀ·dY, a reduce of its
// partial), and the engine keeps two of each in flight — step s+1's broadcasts fly while step s's
// GEMM runs, step j's reduce while step j+1's GEMM runs.  So only part of the collectives plan_step
// lists is waited for.  One rank's clock: a GEMM holds it, a wait holds it until the collective
// ends, and the collectives, once issued, run one after another on the rank's link (the row's and
// the column's transfers share the GPU's one NVLink port, as the α-β model's sum of their times
// already assumes).
#include "cost/cluster.hpp"
#include "cost/geometry.hpp"
#include "cost/time_model.hpp"

namespace mdtp::cost {

// One step of a product: its broadcast(s), its reduce (0 for C = A·B, which reduces nothing) and
// its GEMM.
struct SummaStep {
  double broadcast = 0.0, reduce = 0.0, gemm = 0.0;
};

// The seconds a product of q such steps holds the rank, in the engine's issue and wait order.
double summa_product_seconds(int q, const SummaStep& step);

// Per pass, the seconds of a Geometry's SUMMA collectives that their own products' GEMMs hide: the
// forward's C = A·B, the backward-input pass's dX = dY·Wᵀ, the weight pass's dW += Xᵀ·dY.  Zero for
// every other kind of Linear and for a grid of one.
struct SummaHidden {
  double forward = 0.0, backward_input = 0.0, backward_weight = 0.0;
};
SummaHidden summa_hidden_seconds(const Geometry& g, const TimeModel& model, const Cluster& cluster);

}  // namespace mdtp::cost
