#include "cost/kernel_time.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace mdtp::cost {

double gemm_roofline_seconds(std::int64_t m, std::int64_t n, std::int64_t k, DType dtype, const Cluster& cluster) {
  require(m >= 0 && n >= 0 && k >= 0, "a GEMM needs non-negative sizes; got m=", m, " n=", n, " k=", k);
  const double M = static_cast<double>(m), N = static_cast<double>(n), K = static_cast<double>(k);
  const double compute = 2.0 * M * N * K / cluster.gemm_rate(dtype);
  const double traffic = static_cast<double>(dtype_size(dtype)) * (M * K + K * N + M * N) / cluster.stream_bandwidth();
  return std::max(compute, traffic);
}

double stream_seconds(double bytes, const Cluster& cluster) {
  require(bytes >= 0, "a kernel moves a non-negative number of bytes; got ", bytes);
  return bytes / cluster.stream_bandwidth();
}

}  // namespace mdtp::cost
