#include "run/stop_request.hpp"

#include <unistd.h>

#include "core/error.hpp"
#include "run/rank_stats.hpp"

namespace mdtp::run {
namespace {

// The one piece of process-wide state here: a signal handler can reach nothing else, and only a
// lock-free atomic (or volatile sig_atomic_t) may be written from one.
volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_stop_signal(int signal) {
  if (g_signal != 0) _exit(128 + signal);  // the second signal: now (async-signal-safe)
  g_signal = signal;
}

void install(int signal, struct sigaction* previous) {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  // SA_RESTART: a read or a sleep interrupted by the signal resumes; the flag is looked at once
  // per step.
  action.sa_flags = SA_RESTART;
  require(sigaction(signal, &action, previous) == 0, "cannot install the handler of ", signal_name(signal));
}

}  // namespace

const char* signal_name(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    default: return "a signal";
  }
}

StopRequest::StopRequest() {
  g_signal = 0;
  install(SIGTERM, &previous_term_);
  install(SIGINT, &previous_int_);
}

StopRequest::~StopRequest() {
  sigaction(SIGTERM, &previous_term_, nullptr);
  sigaction(SIGINT, &previous_int_, nullptr);
}

int StopRequest::signal_here() const { return g_signal; }

int stop_signal_everywhere(const StopRequest& request, MPI_Comm world, WaitPolicy policy) {
  return static_cast<int>(mean_max_over_ranks(static_cast<double>(request.signal_here()), world, policy).max);
}

}  // namespace mdtp::run
