#include "tp/layernorm.hpp"

#include "mesh/mesh.hpp"
#include "tp/linear.hpp"

namespace mdtp {

LayerNorm::LayerNorm(const TpContext& ctx, std::string name, std::int64_t hidden, Layout layout,
                     const std::vector<std::string>& tp_axes, double eps, Kind kind)
    : ctx_(ctx), name_(std::move(name)), hidden_(hidden), layout_(std::move(layout)), eps_(eps), kind_(kind) {
  require(layout_.col_groups.size() <= 1, name_, ": LayerNorm needs the hidden dimension split over at most one group; layout ",
          layout_.name, " splits it over ", layout_.col_groups.size());
  hidden_group_ = layout_.col_groups.empty() ? "" : layout_.col_groups.front();
  std::string replicated = complement_group(tp_axes, layout_.col_groups);
  std::string partial = spanning_group(layout_.row_groups);
  for (Parameter* p : {&gamma_, &beta_}) {
    p->full_shape = {hidden_};
    p->layout = Layout{layout_.name + ".ln", {}, layout_.col_groups};
    if (!replicated.empty()) p->replicated_over = {replicated};
    if (!partial.empty()) p->partial_grad_over = {partial};
  }
  gamma_.name = name_ + ".weight";
  beta_.name = name_ + ".bias";
  materialize(gamma_, ctx_, InitSpec{InitSpec::Kind::constant, 0.0, 1.0});
  if (kind_ == Kind::layer) {
    materialize(beta_, ctx_, InitSpec{InitSpec::Kind::constant, 0.0, 0.0});
  } else {
    // RMSNorm: a zero β for layernorm_apply, never updated.  Its storage is allocated even where
    // ZeRO-3 defers γ's (a row of zeros the width of this rank's hidden slice).
    const ShardBlock b = shard_block(gamma_.layout, ctx_.mesh, 1, hidden_, name_ + " zero shift");
    beta_.value = ctx_.backend.zeros({b.cols}, ctx_.dtype, MemCategory::other);
  }
}

std::vector<Parameter*> LayerNorm::parameters() {
  if (kind_ == Kind::rms) return {&gamma_};
  return {&gamma_, &beta_};
}

Tensor LayerNorm::forward(const Tensor& x, LayerNormSaved& saved) {
  require(!saved.xhat.defined(), name_, ": forward was given the saved state of a micro-batch still in flight");
  const std::int64_t local_cols = gamma_.value.numel();
  require(x.ndim() == 2 && x.cols() == local_cols, name_, ": input shard has shape ", shape_string(x.shape()),
          "; expected [rows, ", local_cols, "] in layout ", layout_.name);
  const Backend& be = ctx_.backend;
  const std::int64_t rows = x.rows();
  Tensor local = be.empty({rows, 2}, DType::f64, MemCategory::activations);
  be.row_mean_m2(x, local);
  int parts = 1;
  Tensor stacked = local;
  if (!hidden_group_.empty() && ctx_.mesh.comm(hidden_group_).size() > 1) {
    Communicator& comm = ctx_.mesh.comm(hidden_group_);
    parts = comm.size();
    stacked = be.empty({rows * parts, 2}, DType::f64, MemCategory::communication);
    comm.all_gather(local, stacked);
  }
  saved.mean_rstd = be.empty({rows, 2}, DType::f64, MemCategory::activations);
  be.merge_row_stats(stacked, parts, local_cols, eps_, saved.mean_rstd, kind_ == Kind::layer);
  saved.xhat = be.empty(x.shape(), x.dtype(), MemCategory::activations);
  Tensor y = be.empty(x.shape(), x.dtype(), MemCategory::activations);
  be.layernorm_apply(x, saved.mean_rstd, gamma_.value, beta_.value, saved.xhat, y);
  return y;
}

Tensor LayerNorm::backward_input(const Tensor& dy, LayerNormSaved& saved) {
  require(saved.xhat.defined(), name_, ": backward called before forward (or twice for one micro-batch)");
  require_shape(dy, saved.xhat.shape(), (name_ + " output gradient").c_str());
  const Backend& be = ctx_.backend;
  Tensor sums = be.empty({dy.rows(), 2}, DType::f64, MemCategory::activations);
  be.layernorm_backward_sums(dy, saved.xhat, gamma_.value, sums, kind_ == Kind::layer);
  if (!hidden_group_.empty() && ctx_.mesh.comm(hidden_group_).size() > 1)
    ctx_.mesh.comm(hidden_group_).all_reduce(sums);
  Tensor dx = be.empty(dy.shape(), dy.dtype(), MemCategory::activations);
  if (kind_ == Kind::layer) {
    be.layernorm_backward(dy, saved.xhat, gamma_.value, saved.mean_rstd, sums, hidden_, dx, gamma_.grad, beta_.grad);
  } else {
    // RMSNorm has no β: its column sums of dy land in a scratch row and are dropped.
    Tensor unused_dbeta = be.zeros(gamma_.grad.shape(), gamma_.grad.dtype(), MemCategory::activations);
    be.layernorm_backward(dy, saved.xhat, gamma_.value, saved.mean_rstd, sums, hidden_, dx, gamma_.grad,
                          unused_dbeta);
  }
  saved = LayerNormSaved{};
  return dx;
}

}  // namespace mdtp
