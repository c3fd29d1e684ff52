#include "tp1d/row_linear.hpp"

#include "mesh/mesh.hpp"
#include "tp1d/mode_1d.hpp"

namespace mdtp {

RowParallelLinear::RowParallelLinear(const TpContext& ctx, const LinearSpec& spec, bool sequence_parallel)
    : LinearBase(ctx, spec, Mode1D::hidden_layout(), sequence_parallel ? Mode1D::seq_layout() : Mode1D::full_layout(),
                 Layout{"1d.row-weight", {"tp"}, {}}, {"tp"}),
      sequence_parallel_(sequence_parallel) {}

// Under sequence parallelism forward's product covers every token row before its reduce-scatter,
// and backward-input gathers dY over tp and keeps the gathered tensor (not the dY it was given).
LinearActivationAllocs RowParallelLinear::activation_allocs(std::int64_t tokens) const {
  LinearActivationAllocs a;
  if (!sequence_parallel_) return a;
  a.keeps_dy = false;
  a.forward_partial_bytes = tokens * spec().out_features * static_cast<std::int64_t>(dtype_size(ctx().dtype));
  a.dy_gather = ctx().mesh.comm("tp").size();
  return a;
}

Tensor RowParallelLinear::matmul_forward(const Tensor& x, LinearSaved& saved) {
  const Backend& be = ctx().backend;
  Communicator& tp = ctx().mesh.comm("tp");
  saved.x = x;
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

Tensor RowParallelLinear::input_gradient(const Tensor& dy, LinearSaved& saved) {
  const Backend& be = ctx().backend;
  Tensor dy_full = dy;
  if (sequence_parallel_) {
    Communicator& tp = ctx().mesh.comm("tp");
    dy_full = be.empty({dy.rows() * tp.size(), dy.cols()}, dy.dtype(), MemCategory::communication);
    tp.all_gather(dy, dy_full);
    saved.dy_gathered = dy_full;
    // This rank's rows of the gathered dY are its own shard: keep the view, not a second copy.
    saved.dy = dy_full.row_slice(dy.rows() * tp.rank(), dy.rows() * (tp.rank() + 1));
  }
  Tensor dx = be.empty({dy_full.rows(), weight().value.rows()}, dy.dtype(), MemCategory::activations);
  be.gemm(false, true, 1.0, dy_full, weight().value, 0.0, dx);
  return dx;
}

void RowParallelLinear::weight_gradient(LinearSaved& saved) {
  const Tensor& dy_full = sequence_parallel_ ? saved.dy_gathered : saved.dy;
  ctx().backend.gemm(true, false, 1.0, saved.x, dy_full, 1.0, weight().grad);
}

}  // namespace mdtp
