#include "train/fault_guard.hpp"

#include <cmath>

#include <fmt/format.h>

#include "train/nonfinite_check.hpp"
#include "zero/nonfinite.hpp"

namespace mdtp {

FaultGuard::FaultGuard(const TrainConfig& config) : config_(config) {}

FaultGuard::LossVerdict FaultGuard::check_loss(double loss, std::int64_t step, TrainRig& rig, TrainResult& result,
                                               std::ostream* progress) {
  if (std::isfinite(loss)) return LossVerdict::update;
  const std::string where = locate_nonfinite_gradient(rig.engine(), rig.mesh(), rig.backend(), rig.world(), true);
  const std::string what =
      fmt::format("step {}: the loss is {}; first non-finite gradient: {}", step, nonfinite_name(loss), where);
  if (!config_.skip_nonfinite) {
    nonfinite_ = what;
    return LossVerdict::stop;
  }
  result.skipped_nonfinite += 1;
  if (progress) *progress << "skipped " << what << " (--skip-nonfinite)\n" << std::flush;
  return LossVerdict::skip;
}

bool FaultGuard::stop_after_update(double grad_norm, std::int64_t step, TrainRig& rig, TrainResult& result,
                                   std::ostream* progress) {
  if (!std::isfinite(grad_norm)) {
    // The engine saw the norm before its update and applied nothing (zero/zero_engine.hpp).
    const std::string where = locate_nonfinite_gradient(rig.engine(), rig.mesh(), rig.backend(), rig.world(), true);
    const std::string what = fmt::format("step {}: the gradient norm is {} (the update is not applied); first "
                                         "non-finite gradient: {}",
                                         step, nonfinite_name(grad_norm), where);
    if (!config_.skip_nonfinite) {
      nonfinite_ = what;
      return true;
    }
    result.skipped_nonfinite += 1;
    if (progress) *progress << "skipped " << what << " (--skip-nonfinite)\n" << std::flush;
  }
  return stop_signalled(rig, result);
}

bool FaultGuard::stop_signalled(TrainRig& rig, TrainResult& result) {
  result.stop_signal = run::stop_signal_everywhere(stop_request_, rig.world(), rig.mesh().wait_policy());
  return result.stop_signal != 0;
}

std::string FaultGuard::stopped_by(const TrainResult& result) const {
  if (!nonfinite_.empty()) return "non-finite";
  return result.stop_signal != 0 ? run::signal_name(result.stop_signal) : "";
}

void FaultGuard::raise_if_nonfinite() const {
  // Every rank holds the same line; the program prints it once and exits 2.
  if (!nonfinite_.empty())
    throw_error(nonfinite_, "; training stopped", config_.out.empty() ? "" : " (results written)",
                config_.save.empty() ? "" : ", no checkpoint saved");
}

}  // namespace mdtp
