// A job with one rank that stops answering: every rank but the last enters a collective on the
// mesh's "world" group (phase "forward", step 7); the last rank sleeps instead, as a rank stuck
// in a kernel or a deadlock would.  Without a deadline the job waits forever; with
// MDTP_COLLECTIVE_TIMEOUT the waiting ranks name the wait and abort the job
// (tests/faults/test_watchdog.py checks the line and the time it took).
//
//   hang_rank OP    OP: all_reduce | barrier | recv (rank 0 receives from the silent rank)
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "comm/ledger.hpp"
#include "core/memory.hpp"
#include "core/tensor.hpp"
#include "mesh/mesh.hpp"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const std::string op = argc > 1 ? argv[1] : "all_reduce";
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  mdtp::MeshConfig config;
  config.world = size;
  mdtp::CommLedger ledger;
  mdtp::Mesh mesh(config, MPI_COMM_WORLD, ledger);
  mdtp::Communicator& world = mesh.comm("world");
  auto tensor = mdtp::Tensor::empty({1000}, mdtp::DType::f32, std::make_shared<mdtp::HostAllocator>(),
                                    mdtp::MemCategory::other);

  ledger.set_step(7);
  mdtp::PhaseScope phase(ledger, "forward");
  if (mesh.rank() == size - 1) {
    // The silent rank: it never joins; the abort of the job ends it.
    std::this_thread::sleep_for(std::chrono::seconds(600));
  } else if (op == "barrier") {
    world.barrier();
  } else if (op == "recv") {
    if (mesh.rank() == 0) world.recv(tensor, size - 1);
  } else {
    world.all_reduce(tensor);
  }
  if (mesh.rank() == 0) std::puts("hang_rank: the collective completed, which it must not");
  MPI_Finalize();
  return 0;
}
