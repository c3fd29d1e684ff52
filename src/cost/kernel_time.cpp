#include "cost/kernel_time.hpp"

#include <algorithm>
#include <array>
#include <limits>

#include "core/error.hpp"

namespace mdtp::cost {

namespace {

struct GemmTile {
  std::int64_t rows, cols;
};

// The thread-block tiles a tensor-core GEMM library chooses among on Ampere and Hopper (CUTLASS's
// and cuBLAS's bf16/f16 kernels: 256×128 and 128×256 for large problems, down to 64×64).
constexpr std::array<GemmTile, 6> kTiles{{{256, 128}, {128, 256}, {128, 128}, {128, 64}, {64, 128}, {64, 64}}};

// A tile's operand reuse: multiply-adds per operand element loaded, Tm·Tn/(Tm+Tn).  Tiles of at
// least 128×128 are taken to keep the tensor cores fed (the microbenchmark's best shapes run on
// them); a smaller tile reaches its reuse's share of that rate.
double tile_rate_fraction(const GemmTile& tile) {
  const double reuse = static_cast<double>(tile.rows * tile.cols) / static_cast<double>(tile.rows + tile.cols);
  constexpr double kFullReuse = 128.0 * 128.0 / 256.0;
  return std::min(1.0, reuse / kFullReuse);
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// The shortest k slice a split-K GEMM runs (a few k-tiles of its software pipeline).
constexpr std::int64_t kMinSliceK = 256;

}  // namespace

double gemm_compute_seconds(std::int64_t m, std::int64_t n, std::int64_t k, DType dtype, const Cluster& cluster,
                            std::int64_t batch) {
  require(m >= 0 && n >= 0 && k >= 0 && batch >= 0, "a GEMM needs non-negative sizes; got m=", m, " n=", n, " k=", k,
          " batch=", batch);
  if (m == 0 || n == 0 || k == 0 || batch == 0) return 0.0;
  const double rate = cluster.gemm_rate(dtype);
  const double K = static_cast<double>(k);
  if (cluster.sm_count <= 0)
    return static_cast<double>(batch) * 2.0 * static_cast<double>(m) * static_cast<double>(n) * K / rate;
  const double sm_rate = rate / cluster.sm_count;
  double best = std::numeric_limits<double>::infinity();
  for (const GemmTile& tile : kTiles) {
    const std::int64_t tiles = batch * ceil_div(m, tile.rows) * ceil_div(n, tile.cols);
    // Split-K: with fewer tiles than SMs the library cuts k into `splits` slices run as separate
    // tiles, each slice of at least kMinSliceK, whose partial sums are then added (written and read
    // in f32 once per slice).
    const std::int64_t max_splits =
        std::max<std::int64_t>(1, std::min(cluster.sm_count / tiles, k / kMinSliceK));
    for (std::int64_t splits = 1; splits <= max_splits; ++splits) {
      const std::int64_t waves = ceil_div(tiles * splits, cluster.sm_count);
      const double slice = static_cast<double>(ceil_div(k, splits));
      const double tile_seconds =
          2.0 * static_cast<double>(tile.rows * tile.cols) * slice / (sm_rate * tile_rate_fraction(tile));
      const double partial_sums =
          splits > 1 ? 2.0 * 4.0 * static_cast<double>(splits * batch * m * n) / cluster.stream_bandwidth() : 0.0;
      best = std::min(best, static_cast<double>(waves) * tile_seconds + partial_sums);
    }
  }
  return best;
}

double gemm_kernel_seconds(std::int64_t m, std::int64_t n, std::int64_t k, DType dtype, const Cluster& cluster,
                           std::int64_t batch) {
  const double compute = gemm_compute_seconds(m, n, k, dtype, cluster, batch);
  if (compute == 0.0) return 0.0;
  const double M = static_cast<double>(m), N = static_cast<double>(n), K = static_cast<double>(k);
  const double traffic = static_cast<double>(batch) * static_cast<double>(dtype_size(dtype)) * (M * K + K * N + M * N) /
                         cluster.stream_bandwidth();
  return std::max(compute, traffic) + cluster.kernel_overhead;
}

double stream_seconds(double bytes, const Cluster& cluster, int kernels) {
  require(bytes >= 0, "a kernel moves a non-negative number of bytes; got ", bytes);
  require(kernels >= 0, "a number of kernels must be non-negative; got ", kernels);
  return bytes / cluster.stream_bandwidth() + kernels * cluster.kernel_overhead;
}

}  // namespace mdtp::cost
