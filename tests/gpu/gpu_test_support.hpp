#pragma once
// Helpers shared by the GPU tests: random data, the relative error the brief's tolerances are
// stated in (‖got - ref‖∞ / ‖ref‖∞), and host/device twins of one tensor.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/backend.hpp"
#include "cuda/cuda_backend.hpp"

namespace mdtp::gpu_test {

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
  if (got.size() != ref.size() || std::isnan(num)) return INFINITY;
  return den == 0.0 ? num : num / den;
}

// The tolerances of the GPU-vs-host comparisons.
inline double tolerance(DType dtype) {
  switch (dtype) {
    case DType::f64: return 1e-12;
    case DType::f32: return 1e-5;
    default: return 1e-2;
  }
}

// The same values on the host and on the device.
struct Twin {
  Tensor host, dev;
};
inline Twin twin(const Backend& host, const CudaBackend& dev, const std::vector<double>& values, const Shape& shape,
                 DType dtype) {
  return {host.from_f64(values, shape, dtype, MemCategory::other), dev.from_f64(values, shape, dtype, MemCategory::other)};
}
inline Twin random_twin(const Backend& host, const CudaBackend& dev, const Shape& shape, DType dtype, unsigned seed) {
  return twin(host, dev, random_values(static_cast<std::size_t>(shape_numel(shape)), seed), shape, dtype);
}

}  // namespace mdtp::gpu_test
