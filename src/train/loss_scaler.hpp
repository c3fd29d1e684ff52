#pragma once
// The loss scale of a training run (spec/run_spec.hpp, LossScaling): f16's dynamic scale, Megatron's
// DynamicGradScaler, or a fixed one.  The backward pass is seeded with the loss gradient times the
// scale, so that small gradients survive f16's narrow range; the optimizer divides it out again
// (ZeroEngine::step(scale)) before the norm, the clipping and the update.
//
// Dynamic scaling, with its Megatron defaults (initial 2^32, min 1, window 1000, hysteresis 2):
//  - an overflow (a non-finite gradient norm — the engine then applies no update) skips the step:
//    the growth count restarts and the hysteresis count drops by one; once it reaches 0 the scale
//    halves (not below min), and keeps halving at each further overflow until it grows again;
//  - after `window` clean steps in a row the scale doubles, and the hysteresis count is restored.
// So at hysteresis 2 a single overflow does not back the scale off; at hysteresis 1 it does.
#include <cstdint>

#include "spec/run_spec.hpp"

namespace mdtp {

struct LossScalerState {
  double scale = 1.0;
  std::int64_t growth_tracker = 0;      // clean steps in a row since the scale last changed
  std::int64_t hysteresis_tracker = 0;  // overflows still tolerated before it halves
  bool operator==(const LossScalerState&) const = default;
};

class LossScaler {
 public:
  // Dynamic under f16 unless a fixed scale is given; a fixed scale, or none (1) otherwise.
  LossScaler(DType params, const LossScaling& config);

  double scale() const { return state_.scale; }
  // Whether overflows are expected and handled (dynamic scaling): a non-finite norm then skips the
  // step; otherwise it is a fault (train/fault_guard.hpp).
  bool dynamic() const { return dynamic_; }
  // After each step: whether its gradients overflowed (the update was not applied).
  void update(bool overflow);

  const LossScalerState& state() const { return state_; }
  void restore(const LossScalerState& state);  // from a checkpoint

 private:
  LossScaling config_;
  bool dynamic_;
  LossScalerState state_;
};

}  // namespace mdtp
