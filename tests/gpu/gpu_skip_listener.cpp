// Linked into every GPU test binary: before the first test case runs, the ranks agree on whether
// each of them has a usable GPU (gpu_presence.hpp).  Where there is none, every rank exits with
// code 77 after "SKIPPED: no GPU available", which ctest maps to "Skipped" (SKIP_RETURN_CODE in
// tests.cmake), so a machine without a GPU never counts these tests as passed; where the CUDA
// setup is broken (a driver too old for the runtime, ...), every rank exits with 1 and the test
// fails, naming the CUDA error.
#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include <mpi.h>

#include <catch2/catch.hpp>

#include "gpu/gpu_presence.hpp"

namespace {

class GpuPresenceListener : public Catch::TestEventListenerBase {
 public:
  using TestEventListenerBase::TestEventListenerBase;

  void testRunStarting(Catch::TestRunInfo const& info) override {
    TestEventListenerBase::testRunStarting(info);
    mdtp::gpu_test::exit_unless_gpu_on_every_rank(info.name.c_str(), MPI_COMM_WORLD);
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(GpuPresenceListener)
