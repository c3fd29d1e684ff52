#include "tp2p5d/mode_2p5d.hpp"

#include "tp2d/summa_linear.hpp"

namespace mdtp {

std::unique_ptr<Linear> Mode2p5D::linear(const LinearSpec& spec, const Layout& input) const {
  require_layout(input, activation_layout(), spec.name);
  // Each depth slab runs SUMMA on its own d-th of the batch rows with the same W, so its dW is
  // partial: summed over tp.dep by reduce_gradients (with the data-parallel sum, if any).
  return std::make_unique<SummaLinear>(ctx_, spec, activation_layout(), weight_layout(), tp_axes(),
                                       std::vector<std::string>{"tp.dep"});
}

}  // namespace mdtp
