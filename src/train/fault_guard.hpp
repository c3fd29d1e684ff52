#pragma once
// The fault guard of a training run (docs/failures.md): a non-finite loss or gradient norm is
// named (the first non-finite gradient, found collectively) and either skipped (--skip-nonfinite,
// a non-finite loss only) or stops training; SIGTERM/SIGINT stop the run after a step, agreed by
// every rank.  An observer of the step loop: it decides whether the loop goes on, and at the end
// says how the run ended.
#include <cstdint>
#include <ostream>
#include <string>

#include "run/stop_request.hpp"
#include "train/train_rig.hpp"
#include "train/trainer.hpp"

namespace mdtp {

class FaultGuard {
 public:
  explicit FaultGuard(const TrainConfig& config);

  enum class LossVerdict { update, skip, stop };
  // Between the gradients and the update, with the loss every rank holds alike.  A non-finite one
  // is named (collective); with --skip-nonfinite the step is counted as skipped (its update not
  // applied) and reported to `progress`, else training stops.
  LossVerdict check_loss(double loss, std::int64_t step, TrainRig& rig, TrainResult& result, std::ostream* progress);
  // After the optimizer step: a non-finite gradient norm (seen by the engine before its update, so
  // nothing was applied) stops training, or with --skip-nonfinite counts the step as skipped; then
  // a stop signal received by any rank (collective).  True: stop after this step.
  bool stop_after_update(double grad_norm, std::int64_t step, TrainRig& rig, TrainResult& result,
                         std::ostream* progress);
  // A stop signal received by any rank (collective); records it in `result`.
  bool stop_signalled(TrainRig& rig, TrainResult& result);

  bool stopped_on_nonfinite() const { return !nonfinite_.empty(); }
  // How the run ended, for the results file: "non-finite", the signal's name, or "".
  std::string stopped_by(const TrainResult& result) const;
  // Throws the non-finite step's one-line error (the same on every rank) if training stopped on one.
  void raise_if_nonfinite() const;

 private:
  const TrainConfig& config_;
  run::StopRequest stop_request_;
  std::string nonfinite_;  // why training stopped on a non-finite value, "" when it did not
};

}  // namespace mdtp
