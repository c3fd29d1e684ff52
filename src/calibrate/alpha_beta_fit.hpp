#pragma once
// Least-squares fit of the α-β model t = a·α + b·β to measured collective times, where a and b
// are the algorithm's coefficients at that size and group (e.g. ring all-reduce on n ranks:
// a = 2(n−1), b = 2(n−1)/n · S).  Sizes span seven decades, so the error that matters is the
// ratio model/measured: an unweighted fit would let the 64 MiB points decide everything and leave
// α meaningless.  Plain relative least squares (weights 1/t²) is biased low, though — a model far
// below a slow point costs at most 1, far above costs without bound — so the fit minimises
// Σ (m − t)² / (m·t), which charges a factor r too high or too low alike ((r − 1)²/r is the same
// for r and 1/r), by iteratively reweighted least squares started from the relative fit.
// α and β are kept non-negative (a negative one is pinned at 0 and the other refitted).
#include <cstdint>
#include <vector>

namespace mdtp::calibrate {

struct FitSample {
  double alpha_coefficient = 0.0;  // a
  double beta_coefficient = 0.0;   // b (already multiplied by the bytes)
  double seconds = 0.0;            // measured t
};

struct AlphaBetaFit {
  double alpha = 0.0;  // seconds per message step
  double beta = 0.0;   // seconds per byte
  int points = 0;
  double rms_relative_error = 0.0;  // sqrt(mean(((model − t)/t)²))
};

// Needs at least one sample with t > 0; samples with t <= 0 are ignored.
AlphaBetaFit fit_alpha_beta(const std::vector<FitSample>& samples);

}  // namespace mdtp::calibrate
