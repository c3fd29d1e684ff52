#include "calibrate/alpha_beta_fit.hpp"

#include <cmath>

#include "core/error.hpp"

namespace mdtp::calibrate {
namespace {

// Weighted least squares of t ≈ a·α + b·β with α, β ≥ 0; weight(i) for each used sample.
template <class Weight>
void solve(const std::vector<FitSample>& samples, Weight weight, double& alpha, double& beta) {
  double saa = 0, sab = 0, sbb = 0, sat = 0, sbt = 0;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const FitSample& s = samples[i];
    if (!(s.seconds > 0)) continue;
    const double w = weight(i);
    saa += w * s.alpha_coefficient * s.alpha_coefficient;
    sab += w * s.alpha_coefficient * s.beta_coefficient;
    sbb += w * s.beta_coefficient * s.beta_coefficient;
    sat += w * s.alpha_coefficient * s.seconds;
    sbt += w * s.beta_coefficient * s.seconds;
  }
  const double det = saa * sbb - sab * sab;
  if (std::abs(det) > 1e-12 * std::max(saa * sbb, 1e-300)) {
    alpha = (sat * sbb - sbt * sab) / det;
    beta = (saa * sbt - sab * sat) / det;
    if (alpha >= 0 && beta >= 0) return;
  }
  // One of the two pinned at zero: keep whichever one-parameter fit leaves less weighted residual.
  const double alpha_only = saa > 0 ? sat / saa : 0.0, beta_only = sbb > 0 ? sbt / sbb : 0.0;
  auto residual = [&](double a, double b) {
    double r = 0;
    for (std::size_t i = 0; i < samples.size(); ++i) {
      const FitSample& s = samples[i];
      if (s.seconds > 0) r += weight(i) * std::pow(s.alpha_coefficient * a + s.beta_coefficient * b - s.seconds, 2);
    }
    return r;
  };
  if (residual(alpha_only, 0.0) <= residual(0.0, beta_only)) alpha = alpha_only, beta = 0.0;
  else alpha = 0.0, beta = beta_only;
}

}  // namespace

AlphaBetaFit fit_alpha_beta(const std::vector<FitSample>& samples) {
  AlphaBetaFit fit;
  for (const auto& s : samples) fit.points += s.seconds > 0 ? 1 : 0;
  require(fit.points > 0, "an α-β fit needs at least one measured time above zero");
  solve(samples, [&](std::size_t i) { return 1.0 / (samples[i].seconds * samples[i].seconds); }, fit.alpha, fit.beta);
  for (int iteration = 0; iteration < 20; ++iteration) {
    const double previous_alpha = fit.alpha, previous_beta = fit.beta;
    solve(samples,
          [&](std::size_t i) {
            const FitSample& s = samples[i];
            const double model = s.alpha_coefficient * previous_alpha + s.beta_coefficient * previous_beta;
            return 1.0 / (s.seconds * std::max(model, 1e-3 * s.seconds));
          },
          fit.alpha, fit.beta);
    if (std::abs(fit.alpha - previous_alpha) <= 1e-9 * std::abs(previous_alpha) &&
        std::abs(fit.beta - previous_beta) <= 1e-9 * std::abs(previous_beta))
      break;
  }
  double sum = 0;
  for (const auto& s : samples) {
    if (!(s.seconds > 0)) continue;
    const double rel = (s.alpha_coefficient * fit.alpha + s.beta_coefficient * fit.beta - s.seconds) / s.seconds;
    sum += rel * rel;
  }
  fit.rms_relative_error = std::sqrt(sum / fit.points);
  return fit;
}

}  // namespace mdtp::calibrate
