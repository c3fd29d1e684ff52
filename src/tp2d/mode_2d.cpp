#include "tp2d/mode_2d.hpp"

#include "tp2d/summa_linear.hpp"

namespace mdtp {

std::unique_ptr<Linear> Mode2D::linear(const LinearSpec& spec, const Layout& input) const {
  require_layout(input, activation_layout(), spec.name);
  // W is split like the activations, so nothing is replicated and dW is complete after backward.
  return std::make_unique<SummaLinear>(ctx_, spec, activation_layout(), weight_layout(), tp_axes(),
                                       std::vector<std::string>{});
}

}  // namespace mdtp
