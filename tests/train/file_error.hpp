#pragma once
// ‖a − b‖∞ / ‖b‖∞ over every dataset of two HDF5 files with the same keys (the /optim group
// skipped): how far a run's gradient dump or checkpoint lies from a reference run's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "io/h5_file.hpp"

namespace mdtp::testing {

inline double file_error(const std::string& a, const std::string& b) {
  const H5File fa = H5File::open_read(a, "test"), fb = H5File::open_read(b, "test");
  double num = 0.0, den = 0.0;
  for (const std::string& key : fb.children("/")) {
    if (key == "optim") continue;
    const std::vector<double> x = fa.read_real(key), y = fb.read_real(key);
    REQUIRE(x.size() == y.size());
    for (std::size_t i = 0; i < y.size(); ++i) {
      num = std::max(num, std::abs(x[i] - y[i]));
      den = std::max(den, std::abs(y[i]));
    }
  }
  return den > 0.0 ? num / den : num;
}

// The worst of ‖a − b‖∞ / ‖b‖∞ taken tensor by tensor (dataset by dataset, /optim skipped), and
// which tensor it was.
struct TensorError {
  double error = 0.0;
  std::string tensor;
};
inline TensorError worst_tensor_error(const std::string& a, const std::string& b) {
  const H5File fa = H5File::open_read(a, "test"), fb = H5File::open_read(b, "test");
  TensorError worst;
  for (const std::string& key : fb.children("/")) {
    if (key == "optim") continue;
    const std::vector<double> x = fa.read_real(key), y = fb.read_real(key);
    REQUIRE(x.size() == y.size());
    double num = 0.0, den = 0.0;
    for (std::size_t i = 0; i < y.size(); ++i) {
      num = std::max(num, std::abs(x[i] - y[i]));
      den = std::max(den, std::abs(y[i]));
    }
    const double e = den > 0.0 ? num / den : num;
    if (e >= worst.error) worst = {e, key};
  }
  return worst;
}

}  // namespace mdtp::testing
