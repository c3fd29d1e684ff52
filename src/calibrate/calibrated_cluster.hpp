#pragma once
// The machine `mdtp calibrate` ran on, as a cluster file (docs/performance-model.md, "Adding a
// cluster") that `mdtp plan` and `mdtp cost` read like the shipped presets: its α-β per link class
// and its GEMM rates as measured, the memory a rank has and the bandwidth a streaming copy reaches
// on it, and a "device" per rank.  Peak rates are declared where known (--peak-flops); otherwise
// the measured GEMM rate stands for the peak, so the GEMM efficiency is 1 by construction.
#include <map>
#include <mpi.h>
#include <string>

#include "calibrate/calibration_io.hpp"
#include "cost/cluster.hpp"

namespace mdtp::calibrate {

struct HostMemory {
  double bytes_per_rank = 0.0;      // the node's physical memory shared by its ranks
  double copy_bandwidth = 0.0;      // B/s a rank's large memcpy reaches with every rank copying at once
};

// Every rank copies a buffer of `bytes` `reps` times, all at once (as training would load the
// memory system); the slowest rank's rate counts.  Collective over `world` (control traffic: MPI
// directly, outside any ledger).
HostMemory measure_host_memory(MPI_Comm world, int ranks_per_node, std::int64_t bytes = 64ll << 20, int reps = 5);

// `declared_peaks` per dtype (flop/s per rank); a measured dtype without a declaration takes its
// measured rate.  mdtp::Error naming the value when a declared peak is below the measured rate.
cost::Cluster calibrated_cluster(const CalibrationResult& fit, const std::string& name, int ranks_per_node,
                                 const HostMemory& memory, const std::map<DType, double>& declared_peaks);

}  // namespace mdtp::calibrate
