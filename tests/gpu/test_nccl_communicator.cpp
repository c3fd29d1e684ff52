// The NCCL communicator on device tensors of every dtype, against serial results: at world size 1,
// and at larger sizes when every rank has its own GPU (with ranks sharing a GPU the factory must
// refuse, on every rank, with the message that points to MDTP_COMM=mpi).
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdlib>

#include "cuda/device_comm.hpp"
#include "cuda/nccl_communicator.hpp"
#include "gpu/comm_checks.hpp"

using namespace mdtp;
using namespace mdtp::gpu_test;

namespace {

MPI_Comm dup_world() {
  MPI_Comm c = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  return c;
}

}  // namespace

TEST_CASE("NCCL communicator: collectives against serial results", "[gpu][nccl]") {
  select_device_for_local_rank(MPI_COMM_WORLD);
  auto dev = make_cuda_backend();
  DeviceCommFactory factory;
  try {
    factory = make_nccl_comm_factory(*dev, MPI_COMM_WORLD);
  } catch (const Error& e) {
    // Only legitimate when ranks share a GPU: then every rank refuses alike.
    CHECK_THAT(e.what(), Catch::Contains("NCCL needs one GPU per rank") && Catch::Contains("MDTP_COMM=mpi"));
    GpuSharing s = measure_gpu_sharing(MPI_COMM_WORLD);
    CHECK(s.local_ranks > s.distinct_gpus);
    WARN("NCCL collectives not run: " << s.local_ranks << " ranks share " << s.distinct_gpus << " GPU(s)");
    return;
  }
  CommLedger ledger;
  auto world = factory("world", dup_world(), &ledger);
  CHECK(std::string(world->backend_name()) == "nccl");
  auto* nccl = dynamic_cast<NcclCommunicator*>(world.get());
  REQUIRE(nccl != nullptr);
  CHECK_FALSE(nccl->initialized());  // lazy: nothing until the first operation

  // A second group that is never used stays uninitialised.
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm parity_comm = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &parity_comm);
  auto parity = factory("parity", parity_comm, &ledger);

  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
    const std::size_t first = ledger.entries().size();
    check_collectives(*world, *dev, dt);
    check_ledger_after_collectives(ledger, first);
  }
  CHECK(nccl->initialized());
  CHECK_FALSE(dynamic_cast<NcclCommunicator&>(*parity).initialized());
  check_collectives(*parity, *dev, DType::f32);  // a sub-group, initialised on first use

  // The ledger's time is the device time between the two events: positive and small.
  for (const auto& e : ledger.entries()) CHECK(e.seconds < 10.0);

  Tensor host = make_host_backend()->zeros({4}, DType::f32, MemCategory::other);
  CHECK_THROWS_WITH(world->all_reduce(host), Catch::Contains("NCCL carries device tensors"));
  check_refused_sendrecv(*world, *dev, "NCCL carries device tensors");
}

TEST_CASE("device communicator choice follows MDTP_COMM", "[gpu][nccl]") {
  unsetenv("MDTP_COMM");
  CHECK(resolve_device_comm_kind() == DeviceCommKind::nccl);
  setenv("MDTP_COMM", "mpi", 1);
  CHECK(resolve_device_comm_kind() == DeviceCommKind::mpi);
  setenv("MDTP_COMM", "gloo", 1);
  CHECK_THROWS_WITH(resolve_device_comm_kind(), Catch::Contains("MDTP_COMM='gloo'"));
  unsetenv("MDTP_COMM");
}
