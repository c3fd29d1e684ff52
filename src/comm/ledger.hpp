#pragma once
// CommLedger: the record of every collective a rank issued.  Communicator implementations never
// write here themselves: Communicator's public methods (communicator.cpp) are the one place that
// records, so MPI and NCCL are accounted identically.  Experiments compare the ledger with the
// cost model per (phase, group, op); bytes follow the nccl-tests conventions (docs/theory.md §5):
//   logical bytes: all-reduce/broadcast/reduce/send/recv = buffer bytes,
//                  all-gather/reduce-scatter = bytes of the full (gathered) buffer;
//   bus bytes = logical * factor: all-reduce 2(n-1)/n, all-gather/reduce-scatter (n-1)/n, else 1.
//
// Wait versus transfer.  A call's issue-to-completion time on one rank includes waiting for the
// last member of the group to arrive, which is skew between ranks, not communication.  With
// synchronised timing on (CommLedger::set_sync_timing, MDTP_SYNC_TIMING=1, --sync-timing), a
// blocking collective is preceded by a barrier on the same group: the barrier's time is the
// entry's wait_seconds and the collective's own time, once everybody is there, is its seconds
// (the transfer).  The barrier is measurement infrastructure and is never an entry itself, so the
// byte totals per (phase, group, op) are the same with the mode on or off.  Point-to-point calls
// and non-blocking calls are not synchronised (a barrier on the group of a send could deadlock
// members that are not part of it, and a non-blocking call overlaps compute by design): their
// seconds stay issue to completion and `synchronised` says which kind an entry is.
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/dtype.hpp"

namespace mdtp {

enum class CollectiveOp : std::uint8_t {
  all_reduce,
  all_gather,
  reduce_scatter,
  broadcast,
  reduce,
  send,
  recv,
  barrier,
};
const char* collective_name(CollectiveOp op);
// nccl-tests bus-bandwidth factor for an op on a group of n ranks.
double bus_factor(CollectiveOp op, int group_size);

struct LedgerEntry {
  CollectiveOp op = CollectiveOp::barrier;
  std::string group;       // mesh group name, e.g. "tp.row"
  int group_size = 1;
  std::int64_t elements = 0;  // elements of the logical buffer
  DType dtype = DType::f32;
  std::int64_t logical_bytes = 0;
  double bus_bytes = 0.0;
  double seconds = 0.0;     // issue to completion, or the transfer alone when `synchronised`
  double wait_seconds = 0.0;  // synchronised: the wait for the last peer to arrive (skew); else 0
  bool synchronised = false;  // seconds measured after a barrier on the group (sync timing)
  // When this rank arrived at the call (steady clock, seconds since its epoch): on Linux one
  // monotonic clock shared by the processes of a host, so arrivals on one host compare; it is not
  // a common clock across hosts.
  double arrived = 0.0;
  std::string phase;        // set by PhaseScope, "" when none
};

// Logical bytes of one call: `elements` is the size of the logical buffer (see header comment).
LedgerEntry make_ledger_entry(CollectiveOp op, const std::string& group, int group_size,
                              std::int64_t elements, DType dtype, const std::string& phase);

struct LedgerKey {
  std::string phase, group;
  CollectiveOp op = CollectiveOp::barrier;
  auto operator<=>(const LedgerKey&) const = default;
};

struct LedgerTotals {
  std::int64_t calls = 0;
  std::int64_t logical_bytes = 0;
  double bus_bytes = 0.0;
  double seconds = 0.0;
  double wait_seconds = 0.0;
  std::int64_t synchronised_calls = 0;
  int group_size = 0;
};

// A ledger belongs to one rank (usually one per mesh, shared by its communicators).  The
// enabled flag is read by Communicator when a call is issued: a call issued while the ledger is
// disabled (warm-up iterations) is never recorded.  record() itself always appends.
class CommLedger {
 public:
  void record(LedgerEntry entry);
  const std::vector<LedgerEntry>& entries() const { return entries_; }
  void clear() { entries_.clear(); }
  bool enabled() const { return enabled_; }
  void set_enabled(bool on) { enabled_ = on; }
  // Synchronised timing of blocking collectives (header comment); off by default.
  bool sync_timing() const { return sync_timing_; }
  void set_sync_timing(bool on) { sync_timing_ = on; }

  const std::string& phase() const { return phase_; }
  void set_phase(std::string phase) { phase_ = std::move(phase); }
  // The training step under way, -1 when none (set by the trainer): not recorded in entries,
  // only named by the collective watchdog when a wait outlives its deadline.
  std::int64_t step() const { return step_; }
  void set_step(std::int64_t step) { step_ = step; }

  // Totals per (phase, group, op) over this rank's entries.
  std::map<LedgerKey, LedgerTotals> summary() const;

 private:
  std::vector<LedgerEntry> entries_;
  std::string phase_;
  std::int64_t step_ = -1;
  bool enabled_ = true;
  bool sync_timing_ = false;
};

// MDTP_SYNC_TIMING: unset, "" or "0" off, "1" on; anything else is an mdtp::Error naming it.
bool sync_timing_from_environment();

// Sets the ledger's phase for a scope and restores the previous one on exit.
class PhaseScope {
 public:
  PhaseScope(CommLedger& ledger, std::string phase);
  ~PhaseScope();
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  CommLedger& ledger_;
  std::string previous_;
};

}  // namespace mdtp
