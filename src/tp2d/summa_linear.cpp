#include "tp2d/summa_linear.hpp"

#include "mesh/mesh.hpp"
#include "tp2d/summa.hpp"

namespace mdtp {
namespace {

SummaGrid grid_of(const TpContext& ctx) {
  return SummaGrid{ctx.mesh.comm("tp.row"), ctx.mesh.comm("tp.col"), ctx.backend};
}

}  // namespace

SummaLinear::SummaLinear(const TpContext& ctx, const LinearSpec& spec, const Layout& activation,
                         const Layout& weight_layout, const std::vector<std::string>& tp_axes,
                         std::vector<std::string> weight_partial_over)
    : LinearBase(ctx, spec, activation, activation, weight_layout, tp_axes, std::move(weight_partial_over)) {
  // LinearBase has checked in/out features against the grid; a SUMMA grid must also be square,
  // which the mesh guarantees for 2D/2.5D but a hand-built mesh might not.
  const SummaGrid grid = grid_of(ctx);
  require(grid.row.size() == grid.col.size(), spec.name, ": SUMMA needs a square grid; tp.row has ",
          grid.row.size(), " ranks, tp.col ", grid.col.size());
}

Tensor SummaLinear::matmul_forward(const Tensor& x, LinearSaved& saved) {
  saved.x = x;
  return summa_nn(grid_of(ctx()), x, weight().value, MemCategory::activations);
}

Tensor SummaLinear::input_gradient(const Tensor& dy, LinearSaved& saved) {
  require(dy.rows() == saved.rows, spec().name, ": output-gradient shard has ", dy.rows(),
          " rows but the forward input shard had ", saved.rows);
  return summa_nt(grid_of(ctx()), dy, weight().value, MemCategory::activations);
}

void SummaLinear::weight_gradient(LinearSaved& saved) {
  summa_tn_accumulate(grid_of(ctx()), saved.x, saved.dy, weight().grad);
}

}  // namespace mdtp
