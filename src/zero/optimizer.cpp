#include "zero/optimizer.hpp"

#include <algorithm>

#include "comm/ledger.hpp"
#include "mesh/mesh.hpp"
#include "spec/names.hpp"

namespace mdtp {

void validate(const OptimizerSpec& c) {
  // The enum holds only known kinds unless a caller cast one in; a checkpoint or a command line
  // reaches it through parse_optimizer_kind, which names the bad string.
  require(c.kind == OptimizerKind::sgd || c.kind == OptimizerKind::adamw, "unknown optimizer kind ",
          static_cast<int>(c.kind), "; expected sgd or adamw");
  require(c.lr > 0.0, "the learning rate must be positive; got ", c.lr);
  require(c.grad_clip >= 0.0, "the gradient clipping norm must be >= 0 (0 = off); got ", c.grad_clip);
  require(c.beta1 >= 0.0 && c.beta1 < 1.0 && c.beta2 >= 0.0 && c.beta2 < 1.0, "AdamW betas must lie in [0, 1); got ",
          c.beta1, " and ", c.beta2);
  require(c.eps > 0.0 && c.weight_decay >= 0.0, "AdamW needs eps > 0 and weight_decay >= 0; got ", c.eps, " and ",
          c.weight_decay);
}

double clip_scale(const OptimizerSpec& config, double grad_norm) {
  return config.grad_clip > 0.0 ? std::min(1.0, config.grad_clip / (grad_norm + 1e-6)) : 1.0;
}

void apply_update(const Backend& backend, const OptimizerSpec& config, Tensor& value, const Tensor& grad, Tensor& m,
                  Tensor& v, bool decays, std::int64_t step, double grad_scale) {
  if (config.kind != OptimizerKind::adamw) {
    backend.axpy(-config.lr * grad_scale, grad, value);
    return;
  }
  AdamWStep s;
  s.lr = config.lr;
  s.beta1 = config.beta1;
  s.beta2 = config.beta2;
  s.eps = config.eps;
  s.weight_decay = decays ? config.weight_decay : 0.0;
  s.step = step;
  s.grad_scale = grad_scale;
  backend.adamw_update(value, grad, m, v, s);
}

Optimizer::Optimizer(const OptimizerSpec& config, std::vector<ModelParam> params, const Mesh& mesh,
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
  PhaseScope phase(mesh_.ledger(), phase::optimizer);
  std::vector<Parameter*> raw;
  for (const ModelParam& p : params_) raw.push_back(p.param);
  const double norm = global_grad_norm(raw, mesh_, backend_, group_);
  const double scale = clip_scale(config_, norm);
  ++steps_;
  Tensor none;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Parameter& p = *params_[i].param;
    apply_update(backend_, config_, p.value, p.grad, has_moments() ? exp_avg_[i] : none,
                 has_moments() ? exp_avg_sq_[i] : none, p.decays, steps_, scale);
  }
  return norm;
}

}  // namespace mdtp
