#include "tp/mode.hpp"

#include "mesh/mesh.hpp"
#include "tp1d/mode_1d.hpp"
#include "tp2d/mode_2d.hpp"
#include "tp2p5d/mode_2p5d.hpp"
#include "tp3d/mode_3d.hpp"
#include "tp/serial_mode.hpp"

namespace mdtp {

std::unique_ptr<LayerNorm> TensorParallelMode::layernorm(const std::string& name, std::int64_t hidden,
                                                         const Layout& input, double eps) const {
  return std::make_unique<LayerNorm>(ctx_, name, hidden, input, tp_axes(), eps);
}

std::vector<std::string> tp_mode_names() { return {"none", "1d", "1d-sp", "2d", "2.5d", "3d"}; }

std::unique_ptr<TensorParallelMode> make_tp_mode(std::string_view name, const TpContext& ctx) {
  const std::string grid = ctx.mesh.topology().config().tp_mode;
  const int tp = ctx.mesh.comm("tp").size();
  auto need_grid = [&](const char* wanted) {
    require(grid == wanted || (std::string(wanted) == "1d" && grid == "1d-sp"), "tensor-parallel mode '", name,
            "' needs a mesh built with tp_mode ", wanted, "; this mesh has tp_mode ", grid);
  };
  if (name == "none") {
    require(tp == 1, "mode 'none' is the serial reference and needs tp=1; got tp=", tp);
    return std::make_unique<SerialMode>(ctx);
  }
  if (name == "1d" || name == "1d-sp") {
    need_grid("1d");
    return std::make_unique<Mode1D>(ctx, name == "1d-sp");
  }
  if (name == "2d") {
    need_grid("2d");
    return std::make_unique<Mode2D>(ctx);
  }
  if (name == "2.5d") {
    need_grid("2.5d");
    return std::make_unique<Mode2p5D>(ctx);
  }
  if (name == "3d") {
    need_grid("3d");
    return std::make_unique<Mode3D>(ctx);
  }
  throw_error("unknown tensor-parallel mode '", name, "'; expected one of none, 1d, 1d-sp, 2d, 2.5d, 3d");
}

void require_layout(const Layout& actual, const Layout& expected, const std::string& who) {
  require(actual == expected, who, ": expected an input in layout ", expected.name, ", got ", actual.name);
}

}  // namespace mdtp
