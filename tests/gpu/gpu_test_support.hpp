#pragma once
// Helpers shared by the GPU tests: random data, values as a dtype stores them, the relative error
// the tolerances are stated in (‖got - ref‖∞ / ‖ref‖∞), and host/device twins of one tensor.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "comm/wait_policy.hpp"
#include "core/backend.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/device_comm.hpp"
#include "core/convert.hpp"

namespace mdtp::gpu_test {

inline std::vector<double> random_values(std::size_t n, unsigned seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// `values` as a tensor of `dtype` holds them (rounded once, as from_f64 does): what a reference
// must start from to test an op rather than the rounding of its inputs.
inline std::vector<double> as_stored(const std::vector<double>& values, DType dtype) {
  std::vector<unsigned char> stored(values.size() * dtype_size(dtype));
  std::vector<double> back(values.size());
  convert_host(DType::f64, values.data(), dtype, stored.data(), values.size());
  convert_host(dtype, stored.data(), DType::f64, back.data(), values.size());
  return back;
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

// This rank's GPU, the device communicator kind and the wait policy of the staged one, chosen
// once per process (collective over MPI_COMM_WORLD, reached at the same point on every rank):
// MDTP_COMM when set, otherwise NCCL unless ranks of some node share a GPU, in which case every
// rank takes the staged MPI communicator (NCCL needs one GPU per rank).  Rank 0 prints the choice
// prefixed by `test_name`.
struct DeviceSetup {
  DeviceCommKind kind = DeviceCommKind::nccl;
  WaitPolicy policy = WaitPolicy::library;
  const char* comm_name() const { return kind == DeviceCommKind::nccl ? "nccl" : "mpi-staged"; }
};

inline const DeviceSetup& device_setup(const char* test_name) {
  static const DeviceSetup setup = [test_name] {
    DeviceSetup s;
    DeviceAssignment a = select_device_for_local_rank(MPI_COMM_WORLD);
    s.policy = resolve_wait_policy(measure_node_occupancy(MPI_COMM_WORLD));
    const char* env = std::getenv("MDTP_COMM");
    std::string why;
    if (env != nullptr && *env != '\0') {
      s.kind = resolve_device_comm_kind();  // an unknown value throws alike on every rank
      why = std::string("MDTP_COMM=") + env;
    } else {
      GpuSharing g = measure_gpu_sharing(MPI_COMM_WORLD);
      int shared = g.local_ranks > g.distinct_gpus ? 1 : 0, any_shared = 0;
      MPI_Allreduce(&shared, &any_shared, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
      s.kind = any_shared != 0 ? DeviceCommKind::mpi : DeviceCommKind::nccl;
      why = "automatic: " + std::to_string(g.local_ranks) + " rank(s) on rank 0's node share " +
            std::to_string(g.distinct_gpus) + " GPU(s)";
    }
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
      std::printf("%s: %d rank(s), device %d of %d visible, device communicator %s (%s)\n", test_name, size,
                  a.device, a.visible_devices, device_comm_kind_name(s.kind), why.c_str());
      std::fflush(stdout);
    }
    return s;
  }();
  return setup;
}

}  // namespace mdtp::gpu_test
