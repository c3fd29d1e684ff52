#include "cost/straggler_pace.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.hpp"

namespace mdtp::cost {

double expected_normal_maximum(std::int64_t n) {
  require(n >= 1, "the expected maximum of n normal draws needs n >= 1; got ", n);
  if (n == 1) return 0.0;
  // Simpson's rule over [−10, 10]: the density of the maximum is n·φ(x)·Φ(x)^(n−1), negligible
  // outside that range for any n a cluster has (its mode is below 7 for n < 1e12).
  constexpr int kIntervals = 4000;
  constexpr double lo = -10.0, hi = 10.0, h = (hi - lo) / kIntervals;
  const double count = static_cast<double>(n);
  const auto integrand = [count](double x) {
    const double phi = std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi);
    const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    if (cdf <= 0.0) return 0.0;
    return x * count * phi * std::exp((count - 1.0) * std::log(cdf));
  };
  double sum = integrand(lo) + integrand(hi);
  for (int i = 1; i < kIntervals; ++i) sum += (i % 2 ? 4.0 : 2.0) * integrand(lo + i * h);
  return sum * h / 3.0;
}

double slowest_gpu_pace(double node_pace, double sigma, std::int64_t node_gpus, std::int64_t gpus) {
  require(gpus >= 2 && node_gpus >= 1, "the pace of the slowest GPU needs a job of 2 or more GPUs and a node of 1 or "
          "more; got ", gpus, " and ", node_gpus);
  const double node = 1.0 - sigma * expected_normal_maximum(node_gpus);
  const double job = 1.0 - sigma * expected_normal_maximum(gpus);
  require(sigma >= 0 && std::min(node, job) > 0,
          "the spread of the GPUs' rates must leave the slowest a positive rate; got sigma ", sigma, " over ", gpus,
          " GPUs");
  return std::min(1.0, node_pace * job / node);
}

}  // namespace mdtp::cost
