// Catch2 main for tests that run under mpiexec.  Every rank runs the same test cases (they are
// SPMD); rank 0 prints its report, and any other rank with failures prints its own report,
// prefixed by its rank, so a failure on rank 5 is never hidden.  The exit code is non-zero on
// every rank when any rank failed.
#define CATCH_CONFIG_RUNNER
#include <mpi.h>

#include <catch2/catch.hpp>
#include <iostream>
#include <sstream>

int main(int argc, char** argv) {
  // MPI_THREAD_MULTIPLE: the collective watchdog's thread may call MPI_Abort while a test is
  // blocked in MPI_Wait (comm/collective_watchdog.hpp).
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  std::ostringstream captured;
  std::streambuf* original = nullptr;
  if (rank != 0) original = std::cout.rdbuf(captured.rdbuf());

  Catch::Session session;
  int failures = session.applyCommandLine(argc, argv);
  if (failures == 0) failures = session.run();

  if (rank != 0) std::cout.rdbuf(original);
  if (rank != 0 && failures != 0)
    std::cerr << "---- report of rank " << rank << " of " << size << " ----\n" << captured.str() << std::flush;

  int any = 0;
  MPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any == 0 ? 0 : 1;
}
