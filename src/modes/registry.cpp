#include "modes/registry.hpp"

#include "mesh/mesh.hpp"
#include "spec/names.hpp"
#include "tp/serial_mode.hpp"
#include "tp1d/mode_1d.hpp"
#include "tp2d/mode_2d.hpp"
#include "tp2p5d/mode_2p5d.hpp"
#include "tp3d/mode_3d.hpp"

namespace mdtp {

std::unique_ptr<TensorParallelMode> make_tp_mode(TpMode mode, const TpContext& ctx) {
  const TpMode mesh_mode = ctx.mesh.topology().tp_mode();
  const int tp = ctx.mesh.comm(group::tp).size();
  require(grid_kind(mode) == grid_kind(mesh_mode), "tensor-parallel mode '", tp_mode_name(mode),
          "' needs a mesh built for the ", tp_grid_kind_name(grid_kind(mode)), " TP grid; this mesh was built for mode ",
          tp_mode_name(mesh_mode));
  switch (mode) {
    case TpMode::none:
      require(tp == 1, "mode 'none' is the serial reference and needs tp=1; got tp=", tp);
      return std::make_unique<SerialMode>(ctx);
    case TpMode::d1: return std::make_unique<Mode1D>(ctx, false);
    case TpMode::d1_sp: return std::make_unique<Mode1D>(ctx, true);
    case TpMode::d2: return std::make_unique<Mode2D>(ctx);
    case TpMode::d2p5: return std::make_unique<Mode2p5D>(ctx);
    case TpMode::d3: return std::make_unique<Mode3D>(ctx);
  }
  throw_error("unknown tensor-parallel mode");
}

}  // namespace mdtp
