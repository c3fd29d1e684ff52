#include "tp1d/column_linear.hpp"

#include "mesh/mesh.hpp"
#include "tp1d/mode_1d.hpp"

namespace mdtp {

ColumnParallelLinear::ColumnParallelLinear(const TpContext& ctx, const LinearSpec& spec, bool sequence_parallel)
    : LinearBase(ctx, spec, sequence_parallel ? Mode1D::seq_layout() : Mode1D::full_layout(), Mode1D::hidden_layout(),
                 Layout{"1d.column-weight", {}, {"tp"}}, {"tp"}),
      sequence_parallel_(sequence_parallel) {}

// Under sequence parallelism backward-input's product covers every token row before its
// reduce-scatter to this rank's rows.
LinearActivationAllocs ColumnParallelLinear::activation_allocs(std::int64_t tokens) const {
  LinearActivationAllocs a;
  if (sequence_parallel_)
    a.input_grad_partial_bytes = tokens * spec().in_features * static_cast<std::int64_t>(dtype_size(ctx().dtype));
  return a;
}

Tensor ColumnParallelLinear::gather_rows(const Tensor& x) const {
  Communicator& tp = ctx().mesh.comm("tp");
  Tensor full = ctx().backend.empty({x.rows() * tp.size(), x.cols()}, x.dtype(), MemCategory::communication);
  tp.all_gather(x, full);
  return full;
}

Tensor ColumnParallelLinear::matmul_forward(const Tensor& x, LinearSaved& saved) {
  saved.x = x;
  Tensor input = sequence_parallel_ ? gather_rows(x) : x;
  Tensor y = ctx().backend.empty({input.rows(), weight().value.cols()}, x.dtype(), MemCategory::activations);
  ctx().backend.gemm(false, false, 1.0, input, weight().value, 0.0, y);
  return y;
}

Tensor ColumnParallelLinear::input_gradient(const Tensor& dy, LinearSaved& saved) {
  const Backend& be = ctx().backend;
  Communicator& tp = ctx().mesh.comm("tp");
  Tensor dx_partial = be.empty({dy.rows(), spec().in_features}, dy.dtype(), MemCategory::activations);
  be.gemm(false, true, 1.0, dy, weight().value, 0.0, dx_partial);
  if (!sequence_parallel_) {
    if (tp.size() > 1) tp.all_reduce(dx_partial);  // Megatron's f in backward
    return dx_partial;
  }
  Tensor dx = be.empty({saved.x.rows(), spec().in_features}, dy.dtype(), MemCategory::activations);
  tp.reduce_scatter(dx_partial, dx);
  return dx;
}

void ColumnParallelLinear::weight_gradient(LinearSaved& saved) {
  // Megatron keeps only the row shard under sequence parallelism and gathers it again here.
  Tensor input = sequence_parallel_ ? gather_rows(saved.x) : saved.x;
  ctx().backend.gemm(true, false, 1.0, input, saved.dy, 1.0, weight().grad);
}

}  // namespace mdtp
