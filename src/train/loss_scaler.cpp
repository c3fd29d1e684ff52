#include "train/loss_scaler.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace mdtp {

LossScaler::LossScaler(DType params, const LossScaling& config)
    : config_(config), dynamic_(params == DType::f16 && config.fixed == 0.0) {
  state_.scale = dynamic_ ? config.initial : config.fixed > 0.0 ? config.fixed : 1.0;
  state_.hysteresis_tracker = config.hysteresis;
}

void LossScaler::update(bool overflow) {
  if (!dynamic_) return;
  if (overflow) {
    state_.growth_tracker = 0;
    state_.hysteresis_tracker -= 1;
    if (state_.hysteresis_tracker <= 0) state_.scale = std::max(state_.scale * 0.5, config_.min);
    return;
  }
  state_.growth_tracker += 1;
  if (state_.growth_tracker == config_.window) {
    state_.growth_tracker = 0;
    state_.hysteresis_tracker = config_.hysteresis;
    state_.scale *= 2.0;
  }
}

void LossScaler::restore(const LossScalerState& state) {
  require(state.scale > 0.0, "a checkpoint's loss scale must be positive; got ", state.scale);
  if (dynamic_) state_ = state;
}

}  // namespace mdtp
