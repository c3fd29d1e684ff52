#include "run/stop_request.hpp"

#include <unistd.h>

#include <memory>

#include "comm/communicator.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/tensor.hpp"

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

int stop_signal_everywhere(const StopRequest& request, Communicator& world) {
  auto flag = Tensor::empty({1}, DType::f64, std::make_shared<HostAllocator>(), MemCategory::other);
  flag.data<double>()[0] = request.signal_here();
  CommLedger* ledger = world.ledger();
  const bool recording = ledger != nullptr && ledger->enabled();
  if (ledger != nullptr) ledger->set_enabled(false);
  try {
    world.all_reduce(flag, ReduceOp::max);
  } catch (...) {
    if (ledger != nullptr) ledger->set_enabled(recording);
    throw;
  }
  if (ledger != nullptr) ledger->set_enabled(recording);
  return static_cast<int>(flag.data<double>()[0]);
}

}  // namespace mdtp::run
