// Linked into every GPU test binary: before the first test case runs, the ranks agree on whether
// each of them sees a GPU.  If any does not, rank 0 prints "SKIPPED: no GPU available" and every
// rank exits with code 77, which ctest maps to "Skipped" (SKIP_RETURN_CODE in tests.cmake), so a
// machine without a GPU never counts these tests as passed.
#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>

namespace {

constexpr int kSkipExitCode = 77;

class GpuPresenceListener : public Catch::TestEventListenerBase {
 public:
  using TestEventListenerBase::TestEventListenerBase;

  void testRunStarting(Catch::TestRunInfo const& info) override {
    TestEventListenerBase::testRunStarting(info);
    int count = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) count = 0;
    int mine = count > 0 ? 1 : 0, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all == 1) return;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0 || mine == 0)
      std::fprintf(stderr, "SKIPPED: no GPU available (rank %d: cudaGetDeviceCount: %s, %d devices)\n", rank,
                   status == cudaSuccess ? "ok" : cudaGetErrorString(status), count);
    std::fflush(stderr);
    MPI_Finalize();
    std::exit(kSkipExitCode);
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(GpuPresenceListener)
