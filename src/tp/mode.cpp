#include "tp/mode.hpp"

#include "mesh/mesh.hpp"

namespace mdtp {

std::unique_ptr<LayerNorm> TensorParallelMode::layernorm(const std::string& name, std::int64_t hidden,
                                                         const Layout& input, double eps,
                                                         LayerNorm::Kind kind) const {
  return std::make_unique<LayerNorm>(ctx_, name, hidden, input, tp_axes(), eps, kind);
}

void require_layout(const Layout& actual, const Layout& expected, const std::string& who) {
  require(actual == expected, who, ": expected an input in layout ", expected.name, ", got ", actual.name);
}

}  // namespace mdtp
