#pragma once
// The deadline on every blocking wait for a collective or a message.
//
// Why: a rank that stops answering (a deadlock in user code, a hung NIC, a rank stuck in a
// kernel) otherwise leaves every other rank waiting forever, and the job holds its nodes until
// the scheduler's time limit.  With a deadline, the first rank whose wait outlives it prints one
// line naming itself (world rank), the group, the op, the element count, the ledger's phase and
// step, and aborts the whole job (MPI_Abort), so the scheduler frees the nodes and the user sees
// where it stopped.
//
// How each wait policy keeps it (comm/wait_policy.hpp):
//  - polite: the waiting thread polls MPI_Test anyway, so it compares the clock itself;
//  - library: the thread is blocked inside MPI_Wait and cannot look at a clock, so it arms the
//    process's watchdog (one thread, started on first use) for the duration of the wait; the
//    watchdog wakes a few times per deadline, and calls MPI_Abort from its own thread — which
//    MPI allows only at MPI_THREAD_MULTIPLE, the level the mdtp program and the test main ask
//    for.  Below that level it ends the process with _Exit after the same line; mpiexec then
//    ends the others.
// Arming costs an uncontended mutex (tens of nanoseconds); a normal wait never wakes the
// watchdog.
//
// The deadline is MDTP_COLLECTIVE_TIMEOUT (seconds, default 300; 0 turns it off), which the MPI
// commands of `mdtp` set from --collective-timeout.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace mdtp {

class CommLedger;

// What a blocking wait is for, named when its deadline passes.  `ledger` (may be null) gives the
// phase and the step at that moment.
struct WaitLabel {
  std::string_view group = "?";
  const char* op = "wait";
  std::int64_t elements = -1;  // -1: not a data-carrying op
  const CommLedger* ledger = nullptr;
};

inline constexpr double kDefaultCollectiveTimeout = 300.0;
// The exit status of a job aborted by the watchdog (the one `timeout` uses).
inline constexpr int kCollectiveTimeoutExit = 124;

// Seconds from the text of MDTP_COLLECTIVE_TIMEOUT / --collective-timeout: a finite number >= 0
// (0: no deadline); anything else is an mdtp::Error naming the value.
double parse_collective_timeout(std::string_view text);
// MDTP_COLLECTIVE_TIMEOUT, or the default when unset or empty.
double collective_timeout_from_env();

// The line printed when `label`'s wait outlived `timeout_seconds` on world rank `world_rank`.
std::string deadline_message(int world_rank, const WaitLabel& label, double timeout_seconds);

// Prints deadline_message on stderr in one write and aborts the job (MPI_Abort where this thread
// may call MPI, else _Exit).  For the thread that notices the deadline itself (polite waits).
[[noreturn]] void abort_on_deadline(const WaitLabel& label, double timeout_seconds);

class CollectiveWatchdog {
 public:
  // Called (from the watchdog's thread) with the line for an expired wait; the process's
  // watchdog prints it and aborts.  A handler that returns (tests) is not called again for the
  // same wait.
  using Expired = std::function<void(const std::string& line)>;
  // `timeout_seconds` 0: never fires, and arm() does nothing.
  CollectiveWatchdog(double timeout_seconds, int world_rank, Expired on_expired);
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  double timeout() const { return timeout_; }
  bool enabled() const { return timeout_ > 0; }

  // Watches one wait for as long as it lives.  `label` must outlive it (it lives on the
  // waiting thread's stack, and that thread is blocked meanwhile).
  class Armed {
   public:
    Armed(CollectiveWatchdog& dog, const WaitLabel& label);
    ~Armed();
    Armed(const Armed&) = delete;
    Armed& operator=(const Armed&) = delete;

   private:
    CollectiveWatchdog* dog_;
    std::uint64_t id_ = 0;
  };

  // The process's watchdog: MDTP_COLLECTIVE_TIMEOUT, the world rank, print and abort.  Made on
  // first use (after MPI_Init); one per process because one process is what the deadline
  // protects, as MPI's own state is one per process.
  static CollectiveWatchdog& process();

 private:
  struct Watched {
    std::uint64_t id;
    std::chrono::steady_clock::time_point since;
    const WaitLabel* label;
    bool reported;
  };
  std::uint64_t add(const WaitLabel& label);
  void remove(std::uint64_t id);
  void watch();

  double timeout_;
  int world_rank_;
  Expired on_expired_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Watched> watched_;
  std::uint64_t next_id_ = 1;
  bool stopping_ = false;
  std::thread thread_;  // started with the first armed wait
};

}  // namespace mdtp
