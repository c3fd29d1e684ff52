#pragma once
// The clock every timed figure of a run reads (collective times, pipeline events, step phases).
//
// Why not std::chrono::steady_clock everywhere: in the SMPI build (MDTP_SMPI, docs/simulate.md)
// every rank is a simulated process of SimGrid and the only meaningful time is the simulated
// one, which MPI_Wtime returns; the host's steady clock there measures the simulator's own work.
// On real hardware RunClock is steady_clock, unchanged.
#include <chrono>

namespace mdtp {

struct RunClock {
  using duration = std::chrono::nanoseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<RunClock>;
  static constexpr bool is_steady = true;
  static time_point now() noexcept;
};

// True in the SMPI build: times are simulated, values may be synthetic.
constexpr bool simulated_build() {
#ifdef MDTP_SMPI
  return true;
#else
  return false;
#endif
}

}  // namespace mdtp
