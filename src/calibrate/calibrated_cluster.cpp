#include "calibrate/calibrated_cluster.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "core/error.hpp"

namespace mdtp::calibrate {

HostMemory measure_host_memory(MPI_Comm world, int ranks_per_node, std::int64_t bytes, int reps) {
  require(ranks_per_node >= 1, "ranks per node must be >= 1; got ", ranks_per_node);
  require(bytes > 0 && reps > 0, "the copy benchmark needs a positive size and count; got ", bytes, " bytes x ", reps);
  std::vector<char> src(static_cast<std::size_t>(bytes), 1), dst(static_cast<std::size_t>(bytes), 0);
  std::memcpy(dst.data(), src.data(), src.size());  // touch every page before timing
  MPI_Barrier(world);
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) {
    src[static_cast<std::size_t>(r)] = static_cast<char>(r);  // the copies are not the same
    std::memcpy(dst.data(), src.data(), src.size());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // A copy reads and writes every byte.
  volatile char sink = dst[static_cast<std::size_t>(bytes / 2)];  // the copies are used
  (void)sink;
  double rate = 2.0 * static_cast<double>(bytes) * reps / seconds;
  MPI_Allreduce(MPI_IN_PLACE, &rate, 1, MPI_DOUBLE, MPI_MIN, world);
  HostMemory m;
  m.copy_bandwidth = rate;
  m.bytes_per_rank = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE)) /
                     ranks_per_node;
  return m;
}

cost::Cluster calibrated_cluster(const CalibrationResult& fit, const std::string& name, int ranks_per_node,
                                 const HostMemory& memory, const std::map<DType, double>& declared_peaks) {
  require(!fit.calibration.gemm_flops.empty(), "the calibration measured no GEMM rate");
  cost::DeclaredDevice device;
  device.name = name;
  device.gpus_per_node = ranks_per_node;
  device.peak_flops = declared_peaks;
  for (const auto& [dtype, rate] : fit.calibration.gemm_flops) device.peak_flops.emplace(dtype, rate);
  for (const auto& [dtype, rate] : fit.calibration.gemm_flops)
    require(device.peak_flops.at(dtype) >= rate, "--peak-flops ", dtype_name(dtype), "=", device.peak_flops.at(dtype),
            " is below the measured GEMM rate ", rate, " flop/s");
  device.hbm_bytes = memory.bytes_per_rank;
  device.hbm_bandwidth = memory.copy_bandwidth;  // measured: efficiency 1
  device.memory_efficiency = 1.0;
  device.library = cost::CollectiveLibrary::mpich;
  // The efficiency is taken on f32 when measured (the training dtype on a host), else the first.
  const DType gemm_dtype =
      fit.calibration.gemm_flops.count(DType::f32) ? DType::f32 : fit.calibration.gemm_flops.begin()->first;
  cost::Cluster c = cost::cluster_from_calibration(fit.calibration, device, gemm_dtype);
  c.description = "the machine mdtp calibrate ran on: one device per rank, " + std::to_string(ranks_per_node) +
                  " per node; links, GEMM rates and memory bandwidth measured";
  return c;
}

}  // namespace mdtp::calibrate
