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

// The tile model at a given main-loop rate (flop/s over the whole GPU): the best tile and split.
double tiled_seconds(std::int64_t m, std::int64_t n, std::int64_t k, const Cluster& cluster, std::int64_t batch,
                     double mainloop_rate, double output_bytes) {
  const double sm_rate = mainloop_rate / cluster.sm_count;
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
      // The epilogue: a tile's thread block writes its output after its main loop, and the blocks
      // of a wave finish together, so a wave ends with its tiles' outputs written at the streaming
      // bandwidth before the next wave's main loops start (a non-persistent kernel).
      const double wave_tiles = static_cast<double>(std::min<std::int64_t>(tiles * splits, cluster.sm_count));
      const double epilogue =
          wave_tiles * static_cast<double>(tile.rows * tile.cols) * output_bytes / cluster.stream_bandwidth();
      const double partial_sums =
          splits > 1 ? 2.0 * 4.0 * static_cast<double>(splits * batch * m * n) / cluster.stream_bandwidth() : 0.0;
      best = std::min(best, static_cast<double>(waves) * (tile_seconds + epilogue) + partial_sums);
    }
  }
  return best;
}

// The bytes each output element's epilogue moves: output_bytes as the caller gave it
// (epilogue_bytes), or the result written once in the operands' dtype when it gave none (0).
double output_bytes_or_dtype(double output_bytes, DType dtype) {
  return output_bytes > 0 ? output_bytes : static_cast<double>(dtype_size(dtype));
}

}  // namespace

double gemm_mainloop_rate(DType dtype, const Cluster& cluster) {
  // The microbenchmark ran one GPU alone; a step runs at the pace of the node's slowest loaded GPU.
  const double pace = cluster.synchronous_pace;
  const double measured_rate = cluster.gemm_rate(dtype);
  if (cluster.sm_count <= 0 || !cluster.gemm_reference_shape) return measured_rate * pace;
  // The microbenchmark timed its best shape whole, epilogues included; the main loop runs faster by
  // what they took.  The shape's time is A / rate + B (main loops, then the writes), so its times
  // at two rates give A and B, and the rate at which it takes its measured time follows.
  const GemmShape& ref = *cluster.gemm_reference_shape;
  const double measured_seconds =
      2.0 * static_cast<double>(ref.m) * static_cast<double>(ref.n) * static_cast<double>(ref.k) / measured_rate;
  const double written = static_cast<double>(dtype_size(dtype));
  const double at_measured = tiled_seconds(ref.m, ref.n, ref.k, cluster, 1, measured_rate, written);
  const double at_double = tiled_seconds(ref.m, ref.n, ref.k, cluster, 1, 2.0 * measured_rate, written);
  const double loops = 2.0 * (at_measured - at_double);  // A / measured_rate
  const double writes = at_measured - loops;              // B
  require(measured_seconds > writes, "the GEMM reference shape's outputs alone take longer to write (", writes,
          " s) than the microbenchmark's measured time (", measured_seconds, " s): check gemm_reference_shape");
  return pace * measured_rate * loops / (measured_seconds - writes);
}

double epilogue_bytes(DType output, bool accumulate) {
  return static_cast<double>(dtype_size(output)) * (accumulate ? 2.0 : 1.0);
}

double gemm_compute_seconds(std::int64_t m, std::int64_t n, std::int64_t k, DType dtype, const Cluster& cluster,
                            std::int64_t batch, double output_bytes) {
  require(m >= 0 && n >= 0 && k >= 0 && batch >= 0, "a GEMM needs non-negative sizes; got m=", m, " n=", n, " k=", k,
          " batch=", batch);
  if (m == 0 || n == 0 || k == 0 || batch == 0) return 0.0;
  if (cluster.sm_count <= 0)
    return static_cast<double>(batch) * 2.0 * static_cast<double>(m) * static_cast<double>(n) *
           static_cast<double>(k) / gemm_mainloop_rate(dtype, cluster);
  return tiled_seconds(m, n, k, cluster, batch, gemm_mainloop_rate(dtype, cluster),
                       output_bytes_or_dtype(output_bytes, dtype));
}

double gemm_kernel_seconds(std::int64_t m, std::int64_t n, std::int64_t k, DType dtype, const Cluster& cluster,
                           std::int64_t batch, double output_bytes) {
  const double compute = gemm_compute_seconds(m, n, k, dtype, cluster, batch, output_bytes);
  if (compute == 0.0) return 0.0;
  const double M = static_cast<double>(m), N = static_cast<double>(n), K = static_cast<double>(k);
  const double delta = static_cast<double>(dtype_size(dtype));
  const double written = output_bytes_or_dtype(output_bytes, dtype);
  const double traffic =
      static_cast<double>(batch) * (delta * (M * K + K * N) + written * M * N) / cluster.stream_bandwidth();
  return std::max(compute, traffic) + cluster.kernel_overhead;
}

double stream_seconds(double bytes, const Cluster& cluster, int kernels) {
  require(bytes >= 0, "a kernel moves a non-negative number of bytes; got ", bytes);
  require(kernels >= 0, "a number of kernels must be non-negative; got ", kernels);
  return bytes / cluster.stream_bandwidth() + kernels * cluster.kernel_overhead;
}

}  // namespace mdtp::cost
