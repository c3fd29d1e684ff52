#include "zero/optimizer.hpp"

#include "comm/ledger.hpp"
#include "mesh/mesh.hpp"

namespace mdtp {

void validate(const OptimizerConfig& c) {
  require(c.kind == "sgd" || c.kind == "adamw", "unknown optimizer '", c.kind, "'; expected sgd or adamw");
  require(c.lr > 0.0, "the learning rate must be positive; got ", c.lr);
  require(c.grad_clip >= 0.0, "the gradient clipping norm must be >= 0 (0 = off); got ", c.grad_clip);
  require(c.beta1 >= 0.0 && c.beta1 < 1.0 && c.beta2 >= 0.0 && c.beta2 < 1.0, "AdamW betas must lie in [0, 1); got ",
          c.beta1, " and ", c.beta2);
  require(c.eps > 0.0 && c.weight_decay >= 0.0, "AdamW needs eps > 0 and weight_decay >= 0; got ", c.eps, " and ",
          c.weight_decay);
}

Optimizer::Optimizer(const OptimizerConfig& config, std::vector<ModelParam> params, const Mesh& mesh,
                     const Backend& backend, std::string model_parallel_group)
    : config_(config), params_(std::move(params)), mesh_(mesh), backend_(backend),
      group_(std::move(model_parallel_group)) {
  validate(config_);
  if (!has_moments()) return;
  for (const ModelParam& p : params_) {
    const Tensor& v = p.param->value;
    exp_avg_.push_back(backend_.zeros(v.shape(), v.dtype(), MemCategory::optimizer_state));
    exp_avg_sq_.push_back(backend_.zeros(v.shape(), v.dtype(), MemCategory::optimizer_state));
  }
}

double Optimizer::step() {
  PhaseScope phase(mesh_.ledger(), "optimizer");
  std::vector<Parameter*> raw;
  for (const ModelParam& p : params_) raw.push_back(p.param);
  const double norm = global_grad_norm(raw, mesh_, backend_, group_);
  double scale = 1.0;
  if (config_.grad_clip > 0.0) scale = std::min(1.0, config_.grad_clip / (norm + 1e-6));
  ++steps_;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Parameter& p = *params_[i].param;
    if (!has_moments()) {
      backend_.axpy(-config_.lr * scale, p.grad, p.value);
      continue;
    }
    AdamWStep s;
    s.lr = config_.lr;
    s.beta1 = config_.beta1;
    s.beta2 = config_.beta2;
    s.eps = config_.eps;
    s.weight_decay = p.decays ? config_.weight_decay : 0.0;
    s.step = steps_;
    s.grad_scale = scale;
    backend_.adamw_update(p.value, p.grad, exp_avg_[i], exp_avg_sq_[i], s);
  }
  return norm;
}

}  // namespace mdtp
