// Hidden by default ([.bench]): the cost of a small all-reduce under each wait policy.
//   mpiexec -n 8 build/tests/test_comm "[.bench]"
#include <catch2/catch.hpp>
#include <chrono>
#include <iostream>

#include "comm_test_groups.hpp"

using namespace mdtp;
using namespace mdtp::test;

TEST_CASE("4 KiB all-reduce time, polite vs library wait", "[.bench][comm]") {
  auto b = make_host_backend();
  const NodeOccupancy occupancy = measure_node_occupancy(MPI_COMM_WORLD);
  const int warmup = 10, iterations = 100;
  for (WaitPolicy policy : {WaitPolicy::polite, WaitPolicy::library, WaitPolicy::polite, WaitPolicy::library}) {
    MPI_Comm dup = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    auto comm = make_mpi_communicator("bench", dup, nullptr, policy);
    Tensor x = b->zeros({1024}, DType::f32, MemCategory::communication);  // 4 KiB
    for (int i = 0; i < warmup; ++i) comm->all_reduce(x);
    comm->barrier();
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) comm->all_reduce(x);
    double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iterations;
    double slowest = 0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (world_rank() == 0)
      std::cout << "all_reduce 4 KiB f32 on " << world_size() << " ranks (" << occupancy.local_ranks << " ranks on "
                << occupancy.cores << " cores; auto -> " << wait_policy_name(resolve_wait_policy(occupancy))
                << "): " << wait_policy_name(policy) << " " << slowest * 1e3 << " ms per call (max over ranks)\n";
    CHECK(b->to_f64(x)[0] == 0.0);
  }
}
