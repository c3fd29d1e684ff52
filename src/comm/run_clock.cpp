#include "comm/run_clock.hpp"

#include <mpi.h>

#include <cmath>

namespace mdtp {

RunClock::time_point RunClock::now() noexcept {
#ifdef MDTP_SMPI
  // Simulated seconds since the simulation started.
  return time_point(duration(static_cast<rep>(std::llround(MPI_Wtime() * 1e9))));
#else
  return time_point(std::chrono::duration_cast<duration>(std::chrono::steady_clock::now().time_since_epoch()));
#endif
}

}  // namespace mdtp
