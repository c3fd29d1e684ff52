#pragma once
// Graceful stop: SIGTERM (what Slurm sends at the time limit) or SIGINT (Ctrl-C) asks a run to
// finish its current step, write what it has (results, and a checkpoint with --save) and exit
// with kStoppedExit; a second signal exits at once with 128 + the signal.
//
// Why a reduction: ranks receive the signal at different moments (or only some of them do), and
// a rank that stops alone leaves the others waiting in their next collective.  So the handler
// only records the signal, and the ranks agree once per step, all at the same point of the
// loop, with one max all-reduce over "world" (stop_signal_everywhere) and act on it together.
// That all-reduce is bookkeeping, not the model's traffic: it is kept out of the ledger.
#include <mpi.h>

#include <csignal>

#include "comm/wait_policy.hpp"

namespace mdtp::run {

// The exit status of a run stopped by a signal after writing its results: sysexits' EX_TEMPFAIL
// ("try again later": it resumes from its checkpoint).
inline constexpr int kStoppedExit = 75;

// Installs the SIGTERM/SIGINT handlers for its lifetime and restores the previous ones after.
// The recorded signal is process-wide (a signal handler can reach nothing else); it is cleared
// when a StopRequest is made, so each run starts without a stop.
class StopRequest {
 public:
  StopRequest();
  ~StopRequest();
  StopRequest(const StopRequest&) = delete;
  StopRequest& operator=(const StopRequest&) = delete;

  // The first signal this process received since, or 0.
  int signal_here() const;

 private:
  struct sigaction previous_term_{}, previous_int_{};
};

// Collective over `world`: the largest signal number any rank received (0: none), the same on
// every rank.  Talks to MPI directly (host memory whatever the device, never in a ledger) and
// waits under `policy`.
int stop_signal_everywhere(const StopRequest& request, MPI_Comm world, WaitPolicy policy);
inline bool stop_requested_everywhere(const StopRequest& request, MPI_Comm world, WaitPolicy policy) {
  return stop_signal_everywhere(request, world, policy) != 0;
}

// "SIGTERM", "SIGINT", else "signal N".
const char* signal_name(int signal);

}  // namespace mdtp::run
