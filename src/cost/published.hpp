#pragma once
// The published asymptotic costs per layer, forward + backward, of each TP mode (Colossal-AI's
// documentation, docs/theory.md §2), evaluated at a mesh's P, q, d.  They are reported BESIDE the
// exact figures and are labelled "published, not normalised consistently": their rows count in
// different units (the 2D bandwidth row is per q-block, the 3D one per cube; latency counts
// ring steps, not calls), so they are a shape to compare with, never a prediction.
//
//   mode   compute     param mem  activation mem  bandwidth          latency
//   1D     1/P         1/P        1               2(P−1)/P           2(P−1)
//   2D     1/q²        1/q²       1/q²            6(q−1)/q           6(q−1)
//   2.5D   1/(d·q²)    1/q²       1/(d·q²)        3(q−1)(d+1)/(d·q)  6(q−1)
//   3D     1/q³        1/q³       1/q³            6(q−1)/q³          6(q−1)
#include <string>

#include "mesh/tp_mode.hpp"

namespace mdtp::cost {

struct PublishedCosts {
  std::string row;   // which table row: "1D", "2D", "2.5D", "3D", or "serial"
  std::string note;  // e.g. "1d-sp has no row of its own: 1D shown"
  double compute = 1.0, parameter_memory = 1.0, activation_memory = 1.0, bandwidth = 0.0, latency = 0.0;
  // The formulas, as printed in the table.
  std::string compute_formula, parameter_formula, activation_formula, bandwidth_formula, latency_formula;
};

// `tp` the TP group size, `depth` the 2.5D depth.  mdtp::Error for a tp the mode cannot have.
PublishedCosts published_costs(TpMode mode, int tp, int depth = 1);

inline constexpr const char* kPublishedLabel = "published, not normalised consistently";

}  // namespace mdtp::cost
