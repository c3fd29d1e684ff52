#include "tp3d/mode_3d.hpp"

#include "tp3d/linear_3d.hpp"

namespace mdtp {

Layout Mode3D::activation_layout(int parity) {
  require(parity == 0 || parity == 1, "3D activation layouts have parity 0 or 1; got ", parity);
  // Rows: tp.weight coarse, then the axis that held the previous Linear's output columns fine.
  if (parity == 0) return Layout{"3d.p0", {"tp.weight", "tp.input"}, {"tp.output"}};
  return Layout{"3d.p1", {"tp.weight", "tp.output"}, {"tp.input"}};
}

std::unique_ptr<Linear> Mode3D::linear(const LinearSpec& spec, const Layout& input) const {
  return std::make_unique<Linear3D>(ctx_, spec, input);
}

}  // namespace mdtp
