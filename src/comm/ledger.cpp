#include "comm/ledger.hpp"

#include <cstdlib>
#include <string_view>

#include "core/error.hpp"

namespace mdtp {

const char* collective_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::all_reduce: return "all_reduce";
    case CollectiveOp::all_gather: return "all_gather";
    case CollectiveOp::reduce_scatter: return "reduce_scatter";
    case CollectiveOp::broadcast: return "broadcast";
    case CollectiveOp::reduce: return "reduce";
    case CollectiveOp::send: return "send";
    case CollectiveOp::recv: return "recv";
    case CollectiveOp::barrier: return "barrier";
  }
  return "?";
}

double bus_factor(CollectiveOp op, int group_size) {
  require(group_size >= 1, "bus_factor needs a group of at least one rank; got group_size=", group_size);
  const double n = group_size;
  switch (op) {
    case CollectiveOp::all_reduce: return 2.0 * (n - 1.0) / n;
    case CollectiveOp::all_gather:
    case CollectiveOp::reduce_scatter: return (n - 1.0) / n;
    case CollectiveOp::broadcast:
    case CollectiveOp::reduce:
    case CollectiveOp::send:
    case CollectiveOp::recv: return 1.0;
    case CollectiveOp::barrier: return 0.0;  // moves no data
  }
  throw_error("unknown collective op code ", static_cast<int>(op));
}

LedgerEntry make_ledger_entry(CollectiveOp op, const std::string& group, int group_size,
                              std::int64_t elements, DType dtype, const std::string& phase) {
  require(elements >= 0, "a ledger entry needs a non-negative element count; got ", elements,
          " for ", collective_name(op), " on group '", group, "'");
  LedgerEntry entry;
  entry.op = op;
  entry.group = group;
  entry.group_size = group_size;
  entry.elements = op == CollectiveOp::barrier ? 0 : elements;
  entry.dtype = dtype;
  entry.logical_bytes = entry.elements * static_cast<std::int64_t>(dtype_size(dtype));
  entry.bus_bytes = static_cast<double>(entry.logical_bytes) * bus_factor(op, group_size);
  entry.phase = phase;
  return entry;
}

void CommLedger::record(LedgerEntry entry) { entries_.push_back(std::move(entry)); }

std::map<LedgerKey, LedgerTotals> CommLedger::summary() const {
  std::map<LedgerKey, LedgerTotals> totals;
  for (const auto& e : entries_) {
    auto& t = totals[LedgerKey{e.phase, e.group, e.op}];
    t.calls += 1;
    t.logical_bytes += e.logical_bytes;
    t.bus_bytes += e.bus_bytes;
    t.seconds += e.seconds;
    t.wait_seconds += e.wait_seconds;
    t.synchronised_calls += e.synchronised ? 1 : 0;
    t.group_size = e.group_size;
  }
  return totals;
}

bool sync_timing_from_environment() {
  const char* value = std::getenv("MDTP_SYNC_TIMING");
  const std::string_view v = value ? value : "";
  if (v.empty() || v == "0") return false;
  if (v == "1") return true;
  throw_error("MDTP_SYNC_TIMING='", v, "' is not a switch; expected 0 or 1");
}

PhaseScope::PhaseScope(CommLedger& ledger, std::string phase)
    : ledger_(ledger), previous_(ledger.phase()) {
  ledger_.set_phase(std::move(phase));
}

PhaseScope::~PhaseScope() { ledger_.set_phase(std::move(previous_)); }

}  // namespace mdtp
