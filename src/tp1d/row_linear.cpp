#include "tp1d/row_linear.hpp"

#include "mesh/mesh.hpp"
#include "tp1d/mode_1d.hpp"

namespace mdtp {

RowParallelLinear::RowParallelLinear(const TpContext& ctx, const LinearSpec& spec, bool sequence_parallel)
    : LinearBase(ctx, spec, Mode1D::hidden_layout(), sequence_parallel ? Mode1D::seq_layout() : Mode1D::full_layout(),
                 Layout{"1d.row-weight", {"tp"}, {}}, {"tp"}),
      sequence_parallel_(sequence_parallel) {}

Tensor RowParallelLinear::matmul_forward(const Tensor& x) {
  const Backend& be = ctx().backend;
  Communicator& tp = ctx().mesh.comm("tp");
  x_ = x;
  Tensor partial = be.empty({x.rows(), spec().out_features}, x.dtype(), MemCategory::activations);
  be.gemm(false, false, 1.0, x, weight().value, 0.0, partial);
  if (!sequence_parallel_) {
    if (tp.size() > 1) tp.all_reduce(partial);  // Megatron's g in forward
    return partial;
  }
  require(x.rows() % tp.size() == 0, spec().name, ": sequence parallelism splits the ", x.rows(),
          " rows over tp=", tp.size(), ", which does not divide them");
  Tensor y = be.empty({x.rows() / tp.size(), spec().out_features}, x.dtype(), MemCategory::activations);
  tp.reduce_scatter(partial, y);
  return y;
}

Tensor RowParallelLinear::matmul_backward(const Tensor& dy) {
  const Backend& be = ctx().backend;
  Tensor dy_full = dy;
  if (sequence_parallel_) {
    Communicator& tp = ctx().mesh.comm("tp");
    dy_full = be.empty({dy.rows() * tp.size(), dy.cols()}, dy.dtype(), MemCategory::communication);
    tp.all_gather(dy, dy_full);
  }
  be.gemm(true, false, 1.0, x_, dy_full, 1.0, weight().grad);
  Tensor dx = be.empty({dy_full.rows(), weight().value.rows()}, dy.dtype(), MemCategory::activations);
  be.gemm(false, true, 1.0, dy_full, weight().value, 0.0, dx);
  return dx;
}

}  // namespace mdtp
