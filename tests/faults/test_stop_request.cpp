// Graceful stop (run/stop_request.hpp): a signal on one rank is seen by every rank at the next
// agreement, which the ledger does not record; a second signal ends the process at once.
#include <mpi.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>

#include <string>

#include "run/stop_request.hpp"

TEST_CASE("a signal on one rank stops every rank together", "[faults][mpi]") {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const auto policy = mdtp::WaitPolicy::polite;
  {
    mdtp::run::StopRequest stop;
    CHECK(stop.signal_here() == 0);
    CHECK_FALSE(mdtp::run::stop_requested_everywhere(stop, MPI_COMM_WORLD, policy));
    if (rank == size - 1) raise(SIGTERM);  // only the last rank is signalled
    CHECK(stop.signal_here() == (rank == size - 1 ? SIGTERM : 0));
    CHECK(mdtp::run::stop_signal_everywhere(stop, MPI_COMM_WORLD, policy) == SIGTERM);
  }
  // A new request starts clear.
  mdtp::run::StopRequest again;
  CHECK(again.signal_here() == 0);
  CHECK(std::string(mdtp::run::signal_name(SIGINT)) == "SIGINT");
}

TEST_CASE("a second signal exits at once with 128 + the signal", "[faults]") {
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // no MPI in the child
    mdtp::run::StopRequest stop;
    raise(SIGINT);
    if (stop.signal_here() != SIGINT) _exit(1);
    raise(SIGINT);
    _exit(0);  // not reached
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 128 + SIGINT);
}
