#pragma once
// CommLedger: the record of every collective a rank issued.  Communicator implementations never
// write here themselves: Communicator's public methods (communicator.cpp) are the one place that
// records, so MPI and NCCL are accounted identically.  Experiments compare the ledger with the
// cost model per (phase, group, op); bytes follow the nccl-tests conventions (docs/theory.md §5):
//   logical bytes: all-reduce/broadcast/reduce/send/recv = buffer bytes,
//                  all-gather/reduce-scatter = bytes of the full (gathered) buffer;
//   bus bytes = logical * factor: all-reduce 2(n-1)/n, all-gather/reduce-scatter (n-1)/n, else 1.
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
  double seconds = 0.0;     // issue to completion, as seen by this rank
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
};

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
