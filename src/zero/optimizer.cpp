#include "zero/optimizer.hpp"

#include <algorithm>
#include <cmath>

#include "comm/ledger.hpp"
#include "mesh/mesh.hpp"
#include "plan/bucket_plan.hpp"  // optimizer_state_dtype
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
  if (grad.dtype() == value.dtype()) return backend.adamw_update(value, grad, m, v, s);
  // A 16-bit gradient (--grad-reduce-dtype bf16/f16) widened into the master's dtype for the update.
  Tensor wide = backend.empty(grad.shape(), value.dtype(), MemCategory::workspace);
  backend.convert(grad, wide);
  backend.adamw_update(value, wide, m, v, s);
}

Optimizer::Optimizer(const OptimizerSpec& config, std::vector<ModelParam> params, const Mesh& mesh,
                     const Backend& backend, std::string model_parallel_group)
    : config_(config), params_(std::move(params)), mesh_(mesh), backend_(backend),
      group_(std::move(model_parallel_group)) {
  validate(config_);
  for (const ModelParam& p : params_) {
    const Tensor& v = p.param->value;
    const DType state = optimizer_state_dtype(v.dtype());
    if (state != v.dtype()) {  // 16-bit parameters: f32 masters from their current values (exact)
      masters_.push_back(backend_.empty(v.shape(), state, MemCategory::master_weights));
      backend_.convert(v, masters_.back());
    }
    if (!has_moments()) continue;
    exp_avg_.push_back(backend_.zeros(v.shape(), state, MemCategory::optimizer_state));
    exp_avg_sq_.push_back(backend_.zeros(v.shape(), state, MemCategory::optimizer_state));
  }
}

void Optimizer::refresh_value(std::size_t i) {
  if (has_masters()) backend_.convert(masters_.at(i), params_.at(i).param->value);
}

double Optimizer::step(double loss_scale) {
  PhaseScope phase(mesh_.ledger(), phase::optimizer);
  std::vector<Parameter*> raw;
  for (const ModelParam& p : params_) raw.push_back(p.param);
  const double norm = global_grad_norm(raw, mesh_, backend_, group_) / loss_scale;
  if (!std::isfinite(norm)) return norm;  // seen before the update: nothing is applied, on every rank
  const double scale = clip_scale(config_, norm) / loss_scale;
  ++steps_;
  Tensor none;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Parameter& p = *params_[i].param;
    apply_update(backend_, config_, has_masters() ? masters_[i] : p.value, p.grad, has_moments() ? exp_avg_[i] : none,
                 has_moments() ? exp_avg_sq_[i] : none, p.decays, steps_, scale);
    refresh_value(i);
  }
  return norm;
}

}  // namespace mdtp
