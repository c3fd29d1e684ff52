#include "comm/collective_watchdog.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "comm/ledger.hpp"
#include "comm/run_clock.hpp"
#include "core/error.hpp"

namespace mdtp {

double parse_collective_timeout(std::string_view text) {
  const std::string copy(text);
  char* end = nullptr;
  const double value = copy.empty() ? -1.0 : std::strtod(copy.c_str(), &end);
  require(!copy.empty() && end == copy.c_str() + copy.size() && std::isfinite(value) && value >= 0,
          "collective timeout '", copy, "' is not a number of seconds >= 0 (0 turns the deadline off)");
  return value;
}

double collective_timeout_from_env() {
  const char* text = std::getenv("MDTP_COLLECTIVE_TIMEOUT");
  if (text == nullptr || *text == '\0') return kDefaultCollectiveTimeout;
  try {
    return parse_collective_timeout(text);
  } catch (const Error& e) {
    throw Error(std::string("MDTP_COLLECTIVE_TIMEOUT: ") + e.what());
  }
}

std::string deadline_message(int world_rank, const WaitLabel& label, double timeout_seconds) {
  std::ostringstream os;
  os << "mdtp: rank " << world_rank << ": collective timeout: " << label.op << " on group '" << label.group << "'";
  if (label.elements >= 0) os << " of " << label.elements << " elements";
  if (label.ledger != nullptr) {
    const std::string& phase = label.ledger->phase();
    os << " in phase '" << (phase.empty() ? "none" : phase) << "'";
    if (label.ledger->step() >= 0) os << " at step " << label.ledger->step();
  }
  os << " did not complete within " << timeout_seconds
     << " s (MDTP_COLLECTIVE_TIMEOUT / --collective-timeout); a rank stopped answering, aborting the job";
  return os.str();
}

namespace {

// MPI_Abort from this thread is allowed when MPI is not running threaded at all (this is the
// thread calling MPI) or when it runs at MPI_THREAD_MULTIPLE.
[[noreturn]] void print_and_abort(const std::string& line, bool this_thread_may_call_mpi) {
  const std::string text = line + "\n";
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
  // The launcher forwards a rank's output asynchronously and stops forwarding once it tears the
  // job down on MPI_Abort: without a pause the line can be lost (seen with MPICH's hydra under
  // load).  Half a second is nothing beside a deadline of seconds.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  int initialized = 0, finalized = 0, level = MPI_THREAD_SINGLE;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Query_thread(&level);
  if (initialized && !finalized && (this_thread_may_call_mpi || level == MPI_THREAD_MULTIPLE))
    MPI_Abort(MPI_COMM_WORLD, kCollectiveTimeoutExit);
  std::_Exit(kCollectiveTimeoutExit);
}

int world_rank_or_minus_one() {
  int initialized = 0, rank = -1;
  MPI_Initialized(&initialized);
  if (initialized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

}  // namespace

void abort_on_deadline(const WaitLabel& label, double timeout_seconds) {
  print_and_abort(deadline_message(world_rank_or_minus_one(), label, timeout_seconds), true);
}

CollectiveWatchdog::CollectiveWatchdog(double timeout_seconds, int world_rank, Expired on_expired)
    : timeout_(timeout_seconds), world_rank_(world_rank), on_expired_(std::move(on_expired)) {
  require(timeout_seconds >= 0 && std::isfinite(timeout_seconds), "a collective watchdog needs a timeout >= 0; got ",
          timeout_seconds);
}

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::uint64_t CollectiveWatchdog::add(const WaitLabel& label) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!thread_.joinable()) thread_ = std::thread([this] { watch(); });
  const std::uint64_t id = next_id_++;
  watched_.push_back(Watched{id, std::chrono::steady_clock::now(), &label, false});
  return id;
}

void CollectiveWatchdog::remove(std::uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(watched_.begin(), watched_.end(), [id](const Watched& w) { return w.id == id; });
  if (it != watched_.end()) watched_.erase(it);
}

void CollectiveWatchdog::watch() {
  // Waking a few times per deadline bounds the lateness of an abort by a fraction of it, and
  // costs nothing measurable (at most ten wake-ups a second).
  const auto timeout = std::chrono::duration<double>(timeout_);
  const auto poll = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::clamp(timeout / 8.0, std::chrono::duration<double>(0.1), std::chrono::duration<double>(1.0)));
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, poll);
    const auto now = std::chrono::steady_clock::now();
    for (Watched& w : watched_) {
      if (w.reported || now - w.since < timeout) continue;
      w.reported = true;
      // Under the lock: the waiting thread cannot remove (and free) the label meanwhile.
      on_expired_(deadline_message(world_rank_, *w.label, timeout_));
    }
  }
}

CollectiveWatchdog::Armed::Armed(CollectiveWatchdog& dog, const WaitLabel& label)
    : dog_(dog.enabled() ? &dog : nullptr) {
  if (dog_ != nullptr) id_ = dog_->add(label);
}

CollectiveWatchdog::Armed::~Armed() {
  if (dog_ != nullptr) dog_->remove(id_);
}

CollectiveWatchdog& CollectiveWatchdog::process() {
  // The SMPI build has no watchdog: SimGrid gives MPI_THREAD_SINGLE (no second thread may call
  // MPI), its ranks share one OS thread, and a deadlock there ends the simulation by itself
  // (SimGrid reports the blocked actors); the provenance of a simulated run says so.
  static CollectiveWatchdog dog(simulated_build() ? 0.0 : collective_timeout_from_env(), world_rank_or_minus_one(),
                                [](const std::string& line) { print_and_abort(line, false); });
  return dog;
}

}  // namespace mdtp
