// The NCCL communicator on device tensors of every dtype, against serial results: at world size 1,
// and at larger sizes when every rank has its own GPU (with ranks sharing a GPU the factory must
// refuse, on every rank, with the message that points to MDTP_COMM=mpi).  Communicators are
// created when made: bootstrapped one by one, or split from one world communicator for a mesh.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdlib>

#include "cuda/device_comm.hpp"
#include "cuda/nccl_communicator.hpp"
#include "cuda/nccl_mesh_splits.hpp"
#include "mesh/mesh.hpp"
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
  // Created at construction (collectively), each by its own bootstrap without a mesh topology.
  auto world = factory("world", dup_world(), &ledger);
  CHECK(std::string(world->backend_name()) == "nccl");
  auto* nccl = dynamic_cast<NcclCommunicator*>(world.get());
  REQUIRE(nccl != nullptr);
  CHECK(std::string(nccl->creation()) == "init-rank");
  CHECK(nccl->stream() != nullptr);
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
  check_collectives(*parity, *dev, DType::f32);  // a sub-group

  // The ledger's time is the device time between the two events: positive and small.
  for (const auto& e : ledger.entries()) CHECK(e.seconds < 10.0);

  Tensor host = make_host_backend()->zeros({4}, DType::f32, MemCategory::other);
  CHECK_THROWS_WITH(world->all_reduce(host), Catch::Contains("NCCL carries device tensors"));
  check_refused_sendrecv(*world, *dev, "NCCL carries device tensors");
}

TEST_CASE("NCCL communicator: a mesh's groups split from one world communicator, up front", "[gpu][nccl]") {
  select_device_for_local_rank(MPI_COMM_WORLD);
  auto dev = make_cuda_backend();
  int size = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // pp = world: with 3+ ranks the middle stages have no "embedding" group, so they must join that
  // split with NCCL_SPLIT_NOCOLOR although the Mesh never asks their factory for it.
  MeshConfig config;
  config.world = size;
  config.pp = size;
  const Topology topology(config);
  DeviceCommFactory factory;
  try {
    factory = make_nccl_comm_factory(*dev, MPI_COMM_WORLD, &topology);
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("NCCL needs one GPU per rank"));
    WARN("NCCL mesh splits not run: ranks share a GPU");
    return;
  }
  const bool split = NcclMeshSplits::supported(MPI_COMM_WORLD);
  CommLedger ledger;
  Mesh mesh(config, MPI_COMM_WORLD, ledger, factory);
  for (const std::string& name : mesh.comm_names()) {
    INFO(name);
    auto& c = dynamic_cast<NcclCommunicator&>(mesh.comm(name));
    CHECK(std::string(c.creation()) == (split ? "split" : "init-rank"));
  }
  CHECK(mesh.has_comm("embedding") == (rank == 0 || rank == size - 1));
  for (const char* name : {"world", "pp", "tp", "dp-cp"}) check_collectives(mesh.comm(name), *dev, DType::f32);
  if (mesh.has_comm("embedding")) check_collectives(mesh.comm("embedding"), *dev, DType::bf16);
  check_refused_sendrecv(mesh.comm("pp"), *dev, "NCCL carries device tensors");

  // The factory serves that mesh, in its order: another request is refused (on every rank alike,
  // before anything collective).
  if (split) {
    MPI_Comm extra = dup_world();
    CHECK_THROWS_WITH(factory("world", extra, &ledger), Catch::Contains("no more groups"));
    MPI_Comm_free(&extra);
  }
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
