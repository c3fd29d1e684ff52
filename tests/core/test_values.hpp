#pragma once
// What the host-kernel tests share: seeded uniform values and the relative ∞-norm error
// ‖got − ref‖∞ / ‖ref‖∞ (the absolute error when ref is zero).
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace mdtp::testing {

inline std::vector<double> random_values(std::size_t n, unsigned seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

inline double rel_inf(const std::vector<double>& got, const std::vector<double>& ref) {
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    num = std::max(num, std::abs(got[i] - ref[i]));
    den = std::max(den, std::abs(ref[i]));
  }
  return den == 0.0 ? num : num / den;
}

}  // namespace mdtp::testing
