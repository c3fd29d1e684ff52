#pragma once
// Memory one rank holds for a Workload's layer, in bytes, read off the code:
//   parameters, gradients   the shards materialize() allocates (value and grad, the dtype);
//   optimizer state         parameter elements × bytes per parameter (an input: 8 for fp32
//                           Adam moments, 12 with an fp32 master copy, 0 for plain SGD);
//   activations kept        what forward leaves alive for backward:
//     Linear (every mode)   its input X as received (1D column under 1d-sp: the row shard; 1D
//                           row, SUMMA, 3D: the shard), except 3D with keep_gathered_3d, which
//                           keeps the gathered X(j,k) [B/q, K/q] and W(k,i) [K/q, N/q] instead;
//     MLP                   fc1's, the activation's input (fc1's output: F, or 2F for SwiGLU's
//                           fused gate|up), fc2's (its input is the activation's output, F:
//                           kept by fc2 as X, or gathered in its place under 3D keep);
//     LayerNorm, RMSNorm    x̂ (the dtype) and per-row (mean, rstd) in float64;
//   output                  the shard forward returns (the caller's, not counted as kept).
// Transient buffers (received SUMMA blocks, 3D gathers, partial products) live only inside a
// call and are not part of these figures.  A kept input is shared with the caller: it is charged
// here because the layer is what keeps it alive until backward.
#include <cstdint>
#include <string>
#include <vector>

#include "cost/cost_model.hpp"

namespace mdtp::cost {

struct MemoryItem {
  std::string name;  // e.g. "fc1: X", "ln: x̂"
  std::int64_t bytes = 0;
};

struct MemoryEstimate {
  std::int64_t parameter_elements = 0;
  std::int64_t parameter_bytes = 0;
  std::int64_t gradient_bytes = 0;
  std::int64_t optimizer_bytes = 0;
  std::int64_t activation_bytes = 0;  // kept from forward to backward: Σ kept
  std::int64_t output_bytes = 0;
  std::vector<MemoryItem> kept;
  std::int64_t total() const { return parameter_bytes + gradient_bytes + optimizer_bytes + activation_bytes; }
};

// Per rank (every rank holds the same shapes).  optimizer_bytes_per_param ≥ 0.
MemoryEstimate estimate_memory(const Workload& workload, double optimizer_bytes_per_param = 0.0);

}  // namespace mdtp::cost
