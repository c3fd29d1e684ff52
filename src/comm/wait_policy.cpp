#include "comm/wait_policy.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "comm/bookkeeping_collectives.hpp"
#include "comm/run_clock.hpp"
#include "core/error.hpp"
#include "spec/names.hpp"

namespace mdtp {

const char* wait_policy_name(WaitPolicy policy) {
  return policy == WaitPolicy::polite ? "polite" : "library";
}

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char message[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(rc, message, &length) != MPI_SUCCESS) length = 0;
  throw_error(call, " failed with MPI error ", rc, ": ", std::string(message, static_cast<std::size_t>(length)));
}

void wait_mpi_request(MPI_Request& request, MPI_Status* status, WaitPolicy policy, const WaitLabel& label) {
  CollectiveWatchdog& watchdog = CollectiveWatchdog::process();
  // Under SimGrid's SMPI polling is wrong, not only wasteful: every MPI_Test advances the
  // simulated clock (a probe: 3.1 ms of simulated time against 16 us for MPI_Wait), so the
  // simulated build always blocks in MPI_Wait; its watchdog is off (collective_watchdog.cpp).
  if (policy == WaitPolicy::library || simulated_build()) {
    // Blocked inside MPI_Wait, this thread cannot see the clock: the watchdog's thread does.
    CollectiveWatchdog::Armed armed(watchdog, label);
    check_mpi(MPI_Wait(&request, status), "MPI_Wait");
    return;
  }
  // Each MPI_Test drives MPI's progress engine once; yielding between tests hands the core to
  // the ranks this one is waiting for.  The clock read (a vDSO call) is cheap beside the yield.
  const auto since = std::chrono::steady_clock::now();
  const std::chrono::duration<double> timeout(watchdog.timeout());
  for (;;) {
    int done = 0;
    check_mpi(MPI_Test(&request, &done, status), "MPI_Test");
    if (done) return;
    if (watchdog.enabled() && std::chrono::steady_clock::now() - since > timeout)
      abort_on_deadline(label, watchdog.timeout());
    sched_yield();
  }
}

namespace {

// The affinity mask of this process as bytes (bit i of byte i/8 = CPU i).
std::vector<unsigned char> affinity_bytes() {
  std::vector<unsigned char> bytes(sizeof(cpu_set_t), 0);
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    // Unknown mask (more CPUs than cpu_set_t holds): assume every hardware thread.
    unsigned n = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned cpu = 0; cpu < n && cpu / 8 < bytes.size(); ++cpu)
      bytes[cpu / 8] |= static_cast<unsigned char>(1u << (cpu % 8));
    return bytes;
  }
  for (std::size_t cpu = 0; cpu < 8 * bytes.size(); ++cpu)
    if (CPU_ISSET(cpu, &set)) bytes[cpu / 8] |= static_cast<unsigned char>(1u << (cpu % 8));
  return bytes;
}

}  // namespace

// Why not MPI_Comm_split_type(MPI_COMM_TYPE_SHARED): it is a blocking call, and on the
// oversubscribed nodes this measurement exists for it spins for ~2 s at 27 ranks on 2 cores
// (MPICH 4.0), whereas one non-blocking all-gather of (processor name, affinity mask) waited on
// politely takes ~50 ms.  Ranks reporting the same processor name share a node.
NodeOccupancy measure_node_occupancy(MPI_Comm world) {
  int size = 0;
  check_mpi(MPI_Comm_size(world, &size), "MPI_Comm_size");
  const std::vector<unsigned char> mask = affinity_bytes();
  const std::size_t name_bytes = MPI_MAX_PROCESSOR_NAME, record = name_bytes + mask.size();

  std::vector<char> mine(record, 0);
  int length = 0;
  check_mpi(MPI_Get_processor_name(mine.data(), &length), "MPI_Get_processor_name");
  std::copy(mask.begin(), mask.end(), mine.begin() + static_cast<std::ptrdiff_t>(name_bytes));

  std::vector<char> all(record * static_cast<std::size_t>(size));
  // Polite: this runs before the policy is known, possibly on an oversubscribed node.
  bookkeeping_all_gather(mine.data(), static_cast<int>(record), MPI_CHAR, all.data(), world, WaitPolicy::polite,
                         WaitLabel{group::world, "all_gather (node occupancy)", static_cast<std::int64_t>(all.size()),
                                   nullptr});

  NodeOccupancy occupancy;
  occupancy.local_ranks = 0;
  std::vector<unsigned char> node_mask(mask.size(), 0);
  auto name_of = [&](const char* p) { return std::string_view(p, strnlen(p, name_bytes)); };
  for (int r = 0; r < size; ++r) {
    const char* theirs = all.data() + record * static_cast<std::size_t>(r);
    if (name_of(theirs) != name_of(mine.data())) continue;
    ++occupancy.local_ranks;
    for (std::size_t i = 0; i < mask.size(); ++i) node_mask[i] |= static_cast<unsigned char>(theirs[name_bytes + i]);
  }
  int cores = 0;
  for (unsigned char byte : node_mask) cores += __builtin_popcount(byte);
  occupancy.cores = std::max(1, cores);
  return occupancy;
}

WaitPolicy parse_wait_policy(std::string_view setting, const NodeOccupancy& occupancy) {
  if (setting == "polite") return WaitPolicy::polite;
  if (setting == "library") return WaitPolicy::library;
  if (setting.empty() || setting == "auto")
    return occupancy.local_ranks > occupancy.cores ? WaitPolicy::polite : WaitPolicy::library;
  throw_error("MDTP_WAIT='", setting, "' is not a wait policy; expected polite, library or auto");
}

WaitPolicy resolve_wait_policy(const NodeOccupancy& occupancy) {
  const char* setting = std::getenv("MDTP_WAIT");
  return parse_wait_policy(setting == nullptr ? std::string_view{} : std::string_view{setting}, occupancy);
}

}  // namespace mdtp
