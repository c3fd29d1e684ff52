#include "tp3d/linear_3d.hpp"

#include "mesh/mesh.hpp"
#include "tp3d/mode_3d.hpp"

namespace mdtp {
namespace {

// A dim-0 gather in flight; alone in its group (q = 1) the shard is the result and nothing runs.
struct Pending {
  Tensor result;
  CommHandle handle;
};

Pending start_gather(Communicator& comm, const Backend& be, const Tensor& shard, MemCategory category) {
  if (comm.size() == 1) return {shard, {}};
  Pending p{be.empty({shard.rows() * comm.size(), shard.cols()}, shard.dtype(), category), {}};
  p.handle = comm.iall_gather(shard, p.result);
  return p;
}

Pending start_reduce_scatter(Communicator& comm, const Backend& be, const Tensor& full, MemCategory category) {
  if (comm.size() == 1) return {full, {}};
  Pending p{be.empty({full.rows() / comm.size(), full.cols()}, full.dtype(), category), {}};
  p.handle = comm.ireduce_scatter(full, p.result);
  return p;
}

int cube_side(const TpContext& ctx, const std::string& who) {
  const TpGrid& grid = ctx.mesh.topology().tp_grid();
  require(grid.kind() == TpGridKind::d3, who,
          ": a 3D Linear needs a mesh built with tp_mode 3d; this mesh has tp_mode ", ctx.mesh.topology().tp_mode());
  return grid.q();
}

int parity_of(const Layout& input, const std::string& who) {
  for (int parity : {0, 1})
    if (input == Mode3D::activation_layout(parity)) return parity;
  const Layout p0 = Mode3D::activation_layout(0), p1 = Mode3D::activation_layout(1);
  throw_error(who, ": a 3D Linear takes its input in layout ", p0.name, " (rows ", p0.row_groups[0], "×",
              p0.row_groups[1], ", columns ", p0.col_groups[0], ") or ", p1.name, " (rows ", p1.row_groups[0], "×",
              p1.row_groups[1], ", columns ", p1.col_groups[0], "); got layout '", input.name, "'");
}

// Checks everything the constructor needs before LinearBase shards anything, so a bad
// configuration fails with the 3D-specific message on every rank and before any collective.
const Layout& checked_input(const TpContext& ctx, const LinearSpec& spec, const Layout& input) {
  const int q = cube_side(ctx, spec.name);
  parity_of(input, spec.name);
  require_3d_features(q, spec.in_features, spec.out_features, spec.name);
  return input;
}

// Each helper checks the parity itself, with the layer's name: the order in which the base
// constructor's arguments are evaluated is unspecified.
Layout weight_layout_for(const Layout& input, const std::string& who) {
  const int parity = parity_of(input, who);
  const std::string& in = input.row_groups[1];
  const std::string& out = input.col_groups[0];
  return Layout{"3d.p" + std::to_string(parity) + ".weight", {out, "tp.weight"}, {in}};
}

Layout output_layout_for(const Layout& input, const std::string& who) {
  return Mode3D::activation_layout(1 - parity_of(input, who));
}

}  // namespace

// Phrased like shard_block's messages ("… must be divisible by …") so every mode reads alike.
void require_3d_features(int q, std::int64_t in_features, std::int64_t out_features, const std::string& who) {
  const std::int64_t q2 = static_cast<std::int64_t>(q) * q;
  require(in_features % q2 == 0, who, ": in_features K=", in_features, " must be divisible by q²=", q2,
          " (3D tensor parallelism on a ", q, "×", q, "×", q, " cube splits the weight's rows over the output and",
          " weight axes)");
  require(out_features % q == 0, who, ": out_features N=", out_features, " must be divisible by q=", q,
          " (3D tensor parallelism on a ", q, "×", q, "×", q, " cube splits the weight's columns over the input axis)");
}

void require_3d_batch(int q, std::int64_t batch, const std::string& who) {
  const std::int64_t q2 = static_cast<std::int64_t>(q) * q;
  require(batch % q2 == 0, who, ": batch rows B=", batch, " must be divisible by q²=", q2,
          " (3D tensor parallelism on a ", q, "×", q, "×", q, " cube splits the activation rows over the weight",
          " axis and one more)");
}

Linear3D::Linear3D(const TpContext& ctx, const LinearSpec& spec, const Layout& input)
    : LinearBase(ctx, spec, checked_input(ctx, spec, input), output_layout_for(input, spec.name),
                 weight_layout_for(input, spec.name),
                 {"tp.input", "tp.weight", "tp.output"}),
      input_group_(input.row_groups[1]),
      output_group_(input.col_groups[0]),
      keep_gathered_(ctx.options.keep_gathered_3d) {}

// Backward-input gathers dY over O and keeps the gathered dY(j,i) for the weight pass; on one
// rank nothing is gathered and the dY it was given is what the weight pass reads.
LinearActivationAllocs Linear3D::activation_allocs(std::int64_t) const {
  LinearActivationAllocs a;
  a.dy_gather = ctx().mesh.comm(output_group_).size();
  a.keeps_dy = a.dy_gather == 1;
  return a;
}

Tensor Linear3D::matmul_forward(const Tensor& x, LinearSaved& saved) {
  const Backend& be = ctx().backend;
  const Mesh& mesh = ctx().mesh;
  // What is kept for backward is accounted as activations; a gather that dies with this call
  // is a communication buffer.
  const MemCategory gathered = keep_gathered_ ? MemCategory::activations : MemCategory::communication;
  // W's gather does not depend on X: start it first so both are in flight together.
  Pending w = start_gather(mesh.comm("tp.weight"), be, weight().value, gathered);
  Pending xg = start_gather(mesh.comm(input_group_), be, x, gathered);
  xg.handle.wait();
  w.handle.wait();

  // Alone in the output group (q = 1) the partial product is Y itself: an activation.
  Communicator& out_comm = mesh.comm(output_group_);
  Tensor partial = be.empty({xg.result.rows(), w.result.cols()}, x.dtype(),
                            out_comm.size() == 1 ? MemCategory::activations : MemCategory::communication);
  be.gemm(false, false, 1.0, xg.result, w.result, 0.0, partial);
  Pending y = start_reduce_scatter(out_comm, be, partial, MemCategory::activations);
  y.handle.wait();

  saved.x = keep_gathered_ ? xg.result : x;
  if (keep_gathered_) saved.w = w.result;
  // Y itself is returned to the caller; when it is the partial product (q = 1) it is kept as is.
  return y.result;
}

Tensor Linear3D::input_gradient(const Tensor& dy, LinearSaved& saved) {
  require(dy.rows() == saved.rows, spec().name, ": output-gradient shard has ", dy.rows(),
          " rows but the forward input shard had ", saved.rows, " (both are B/q² rows)");
  const Backend& be = ctx().backend;
  const Mesh& mesh = ctx().mesh;
  Communicator& out_comm = mesh.comm(output_group_);
  // dY and (unless kept) W are gathered together; dX needs nothing else.
  Pending dyg = start_gather(out_comm, be, dy, MemCategory::communication);
  Pending w{saved.w, {}};
  if (!keep_gathered_) w = start_gather(mesh.comm("tp.weight"), be, weight().value, MemCategory::communication);
  dyg.handle.wait();
  w.handle.wait();
  saved.w = Tensor{};  // the weight pass does not need W
  // The gathered dY(j,i) is what the weight pass multiplies by; this rank's own rows of it are
  // its dY shard (for the bias gradient): keep the view, not a second copy.
  saved.dy_gathered = dyg.result;
  saved.dy = dyg.result.row_slice(dy.rows() * out_comm.rank(), dy.rows() * (out_comm.rank() + 1));

  // Alone in the input group (q = 1) the partial product is dX itself: an activation.
  Communicator& in_comm = mesh.comm(input_group_);
  Tensor dx_partial = be.empty({dyg.result.rows(), w.result.rows()}, dy.dtype(),
                               in_comm.size() == 1 ? MemCategory::activations : MemCategory::communication);
  be.gemm(false, true, 1.0, dyg.result, w.result, 0.0, dx_partial);
  Pending dx = start_reduce_scatter(in_comm, be, dx_partial, MemCategory::activations);
  dx.handle.wait();
  return dx.result;
}

void Linear3D::weight_gradient(LinearSaved& saved) {
  const Backend& be = ctx().backend;
  const Mesh& mesh = ctx().mesh;
  Pending xg{saved.x, {}};
  if (!keep_gathered_) xg = start_gather(mesh.comm(input_group_), be, saved.x, MemCategory::communication);
  xg.handle.wait();
  const Tensor& dyg = saved.dy_gathered;
  // In the gradients' dtype: the reduce-scatter over the weight group is a gradient sum.
  Tensor dw_partial = be.empty({xg.result.cols(), dyg.cols()}, weight().grad.dtype(), MemCategory::communication);
  be.gemm(true, false, 1.0, xg.result, dyg, 0.0, dw_partial);
  Pending dw = start_reduce_scatter(mesh.comm("tp.weight"), be, dw_partial, MemCategory::communication);
  dw.handle.wait();
  be.axpy(1.0, dw.result, weight().grad);
}

}  // namespace mdtp
