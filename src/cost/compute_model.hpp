#pragma once
// The GEMMs one rank runs in a Workload's step, with their local shapes, so compute time is
// flops / (a measured GEMM rate).  Only GEMMs are counted: bias adds, GeLU and LayerNorm are
// O(rows·cols) elementwise passes, small beside the O(rows·cols·k) products for the layer
// sizes the experiments use; the report says so.
//
// Per Linear Y = X·W (X [B, K], W [K, N]), m×n×k of each product on one rank:
//   none        fwd  B×N×K           bwd  dW K×N×B, dX B×K×N
//   1D column   fwd  B×N/P×K         bwd  dW K×N/P×B, dX B×K×N/P        (1d-sp: B after gathering)
//   1D row      fwd  B×N×K/P         bwd  dW K/P×N×B, dX B×K/P×N
//   2D/2.5D     fwd  q × Bl×N/q×K/q  bwd  dX q × Bl×K/q×N/q, dW q × K/q×N/q×Bl   (Bl = B/(d·q))
//   3D          fwd  B/q×N/q×K/q     bwd  dX B/q×K/q×N/q, dW K/q×N/q×B/q
// LayerNorm runs no GEMM.
#include <cstdint>
#include <string>
#include <vector>

#include "cost/cost_model.hpp"

namespace mdtp::cost {

struct TimeModel;

struct PlannedGemm {
  std::string phase;   // "forward" | "backward"
  std::string layer;   // "linear", "fc1", "fc2"
  std::string what;    // "Y=XW", "dX=dYWᵀ", "dW=XᵀdY"
  std::int64_t m = 0, n = 0, k = 0;
  int count = 1;       // identical products (SUMMA runs q of each)
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * count; }
};

// The GEMMs of one forward + backward on one rank (every rank runs the same shapes).
std::vector<PlannedGemm> plan_gemms(const Workload& workload);

double total_flops(const std::vector<PlannedGemm>& gemms);

// Σ flops / rate, at the model's GEMM rate for `dtype`.
double gemm_seconds(const std::vector<PlannedGemm>& gemms, DType dtype, const TimeModel& model);

}  // namespace mdtp::cost
