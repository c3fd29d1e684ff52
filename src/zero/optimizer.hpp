#pragma once
// Optimizers over the model's sharded parameters.  Every update is element-wise, so it runs on
// each rank's shard unchanged in every mode; replicated shards receive identical gradients
// (reduce_gradients made them so) and stay identical.
//   sgd     p -= lr · c · g
//   adamw   PyTorch AdamW (β1 0.9, β2 0.95, eps 1e-8, decoupled weight decay 0.1 on parameters
//           of 2+ dimensions only: Parameter::decays), bias-corrected
// where c is the clipping factor: with grad_clip > 0, c = min(1, grad_clip / (‖g‖ + 1e-6)) from
// the global norm that counts every element once (torch.nn.utils.clip_grad_norm_).
// Optimizer is ZeRO stage 0 (the whole TP shard of every parameter on every dp replica); stages 1–3
// (zero_engine.hpp) apply the same update to their shards through apply_update.
//
// Mixed precision: bf16/f16 parameters are updated through f32 master weights (kept from the
// parameters' initial values) with f32 moments; after each update the parameter is the master
// rounded once to nearest even, so it always equals round(master) bit for bit.  Gradients are f32
// (or, with --grad-reduce-dtype, the parameters' 16-bit dtype, widened for the update).
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_param.hpp"
#include "spec/names.hpp"
#include "spec/run_spec.hpp"

namespace mdtp {

// The optimizer and its hyper-parameters are the run spec's OptimizerSpec (spec/run_spec.hpp).

// Throws an mdtp::Error naming an unknown kind or a value out of range.
void validate(const OptimizerSpec& config);

// The clipping factor c for a global gradient norm (1 without clipping).
double clip_scale(const OptimizerSpec& config, double grad_norm);

// One update of `value` from `grad` (multiplied by grad_scale) on `backend`: SGD, or AdamW as step
// `step` (from 1) with moments m and v and weight decay when `decays`.  Element-wise, so the
// unsharded optimizer and ZeRO's shards (src/zero/shard_optimizer.hpp) share it.  `value` is f32
// or f64 (a master weight for 16-bit parameters); a gradient of another dtype is widened to it.
void apply_update(const Backend& backend, const OptimizerSpec& config, Tensor& value, const Tensor& grad, Tensor& m,
                  Tensor& v, bool decays, std::int64_t step, double grad_scale);

class Optimizer {
 public:
  Optimizer(const OptimizerSpec& config, std::vector<ModelParam> params, const Mesh& mesh, const Backend& backend,
            std::string model_parallel_group = group::tp_pp);
  // Clips and applies one update from the (reduced) gradients; returns the global gradient norm
  // before clipping.  Collective over the model-parallel group (the norm).  The gradients are
  // `loss_scale` times the true ones (f16's loss scaling): it is divided out of the norm and the
  // update.  A non-finite norm applies nothing.
  double step(double loss_scale = 1.0);

  const OptimizerSpec& config() const { return config_; }
  bool has_moments() const { return config_.kind == OptimizerKind::adamw; }
  std::int64_t step_count() const { return steps_; }
  void set_step_count(std::int64_t steps) { steps_ = steps; }
  const std::vector<ModelParam>& parameters() const { return params_; }
  // AdamW's first and second moments of parameter i, in the parameter's layout.
  Tensor& exp_avg(std::size_t i) { return exp_avg_.at(i); }
  Tensor& exp_avg_sq(std::size_t i) { return exp_avg_sq_.at(i); }
  // The f32 master weights of a 16-bit parameter i (undefined otherwise); after loading new
  // values into one, refresh_value(i) rounds it into the parameter.
  bool has_masters() const { return !masters_.empty(); }
  Tensor& master(std::size_t i) { return masters_.at(i); }
  void refresh_value(std::size_t i);

 private:
  OptimizerSpec config_;
  std::vector<ModelParam> params_;
  const Mesh& mesh_;
  const Backend& backend_;
  std::string group_;
  std::int64_t steps_ = 0;
  std::vector<Tensor> exp_avg_, exp_avg_sq_, masters_;
};

}  // namespace mdtp
