// The staged MPI communicator: device tensors through host buffers, so that several ranks can
// share one GPU (ctest runs this binary on 1, 2 and 4 ranks of one machine).
#include <mpi.h>

#include <catch2/catch.hpp>

#include "comm/wait_policy.hpp"
#include "cuda/device_comm.hpp"
#include "gpu/comm_checks.hpp"

using namespace mdtp;
using namespace mdtp::gpu_test;

TEST_CASE("staged MPI communicator: collectives against serial results", "[gpu][staged]") {
  DeviceAssignment a = select_device_for_local_rank(MPI_COMM_WORLD);
  CHECK(a.device == a.local_rank % a.visible_devices);
  auto dev = make_cuda_backend();
  auto host_staging = std::make_shared<HostAllocator>();
  const WaitPolicy policy = resolve_wait_policy(measure_node_occupancy(MPI_COMM_WORLD));
  DeviceCommFactory factory = make_device_comm_factory(*dev, MPI_COMM_WORLD, DeviceCommKind::mpi, policy, host_staging);
  CommLedger ledger;
  MPI_Comm c = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  auto world = factory("world", c, &ledger);
  CHECK(std::string(world->backend_name()) == "mpi-staged");
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(world->size() == size);
  CHECK(world->world_ranks().size() == static_cast<std::size_t>(size));

  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
    const std::size_t first = ledger.entries().size();
    check_collectives(*world, *dev, dt);
    check_ledger_after_collectives(ledger, first);  // recorded once, not again by the inner MPI one
  }
  // Staging buffers are accounted as communication memory and all released.
  CHECK(host_staging->tracker().peak(MemCategory::communication) > 0);
  CHECK(host_staging->tracker().current(MemCategory::communication) == 0);
  CHECK(host_staging->tracker().current_total() == 0);

  Tensor host = make_host_backend()->zeros({4}, DType::f32, MemCategory::other);
  CHECK_THROWS_WITH(world->all_reduce(host), Catch::Contains("it carries device tensors"));
  check_refused_sendrecv(*world, *dev, "it carries device tensors");
}
