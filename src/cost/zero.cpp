#include "cost/zero.hpp"

#include <cmath>

#include "core/error.hpp"

namespace mdtp::cost {

ZeroStageCost zero_stage_cost(const ZeroConfig& c, int stage) {
  require(c.parameters > 0 && std::isfinite(c.parameters), "ZeRO needs a positive parameter count; got ", c.parameters);
  require(c.data_parallel >= 1, "ZeRO needs a data-parallel group of at least one rank; got dp=", c.data_parallel);
  require(c.param_bytes >= 0 && c.grad_bytes >= 0 && c.optimizer_bytes >= 0,
          "ZeRO bytes per parameter must be >= 0; got param=", c.param_bytes, ", grad=", c.grad_bytes,
          ", optimizer=", c.optimizer_bytes);
  const double psi = c.parameters, nd = c.data_parallel;
  const double p = c.param_bytes, g = c.grad_bytes, k = c.optimizer_bytes;
  ZeroStageCost s;
  s.stage = stage;
  switch (stage) {
    case 0:
      s.name = "baseline DP";
      s.memory_bytes = (p + g + k) * psi;
      s.comm_elements = 2.0 * psi;
      s.comm_bytes = 2.0 * psi * g;  // all-reduce of gradients = reduce-scatter + all-gather
      s.memory_formula = "(p+g+K)*Psi";
      s.comm_formula = "2Psi all-reduce";
      return s;
    case 1:
      s.name = "optimizer states";
      s.memory_bytes = p * psi + g * psi + k * psi / nd;
      s.comm_elements = 2.0 * psi;
      s.comm_bytes = psi * g + psi * p;
      s.memory_formula = "p*Psi + g*Psi + K*Psi/Nd";
      s.comm_formula = "2Psi reduce-scatter + all-gather";
      return s;
    case 2:
      s.name = "+ gradients";
      s.memory_bytes = p * psi + (g + k) * psi / nd;
      s.comm_elements = 2.0 * psi;
      s.comm_bytes = psi * g + psi * p;
      s.memory_formula = "p*Psi + (g+K)*Psi/Nd";
      s.comm_formula = "2Psi reduce-scatter + all-gather";
      return s;
    case 3:
      s.name = "+ parameters";
      s.memory_bytes = (p + g + k) * psi / nd;
      s.comm_elements = 3.0 * psi;
      s.comm_bytes = 2.0 * psi * p + psi * g;
      s.memory_formula = "(p+g+K)*Psi/Nd";
      s.comm_formula = "3Psi all-gather fwd + all-gather bwd + reduce-scatter";
      return s;
    default: break;
  }
  throw_error("ZeRO stages are 0, 1, 2 and 3; got stage=", stage);
}

std::vector<ZeroStageCost> zero_costs(const ZeroConfig& config) {
  std::vector<ZeroStageCost> out;
  for (int stage = 0; stage <= 3; ++stage) out.push_back(zero_stage_cost(config, stage));
  return out;
}

}  // namespace mdtp::cost
