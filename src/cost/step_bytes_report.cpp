#include "cost/step_bytes_report.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "spec/run_spec_json.hpp"

namespace mdtp::cost {
namespace {

struct StageTotals {
  std::int64_t calls = 0, logical_bytes = 0;
  double bus_bytes = 0.0;
};

StageTotals totals_of(const std::map<LedgerKey, LedgerTotals>& keys) {
  StageTotals t;
  for (const auto& [key, k] : keys) {
    t.calls += k.calls;
    t.logical_bytes += k.logical_bytes;
    t.bus_bytes += k.bus_bytes;
  }
  return t;
}

}  // namespace

int busiest_stage(const std::vector<StepCommPlan>& stages) {
  int best = 0;
  std::int64_t most = -1;
  for (std::size_t s = 0; s < stages.size(); ++s)
    if (const std::int64_t bytes = stages[s].logical_bytes(); bytes > most) {
      most = bytes;
      best = static_cast<int>(s);
    }
  return best;
}

std::string step_bytes_text(const RunSpec& spec, const std::vector<StepCommPlan>& stages) {
  const int busiest = busiest_stage(stages);
  const std::map<LedgerKey, LedgerTotals> keys = stages.at(static_cast<std::size_t>(busiest)).totals();
  const StageTotals all = totals_of(keys);
  std::string out = fmt::format("Whole-step bytes of {}\n", describe(spec));
  out += fmt::format("Busiest pipeline stage: {} of {}; each of its ranks issues, per step (B = bytes; logical: the "
                     "buffer a call moves, as the ledger counts it; bus: the algorithm's bytes on the wire per rank):\n",
                     busiest, stages.size());
  out += fmt::format("{:<13} {:<18} {:<15} {:>5} {:>9} {:>16} {:>18}\n", "phase", "group", "op", "ranks", "calls",
                     "logical B", "bus B");
  for (const auto& [key, k] : keys)
    out += fmt::format("{:<13} {:<18} {:<15} {:>5} {:>9} {:>16} {:>18.0f}\n", key.phase, key.group,
                       collective_name(key.op), k.group_size, k.calls, k.logical_bytes, k.bus_bytes);
  out += fmt::format("{:<13} {:<18} {:<15} {:>5} {:>9} {:>16} {:>18.0f}\n", "total", "", "", "", all.calls,
                     all.logical_bytes, all.bus_bytes);
  out += "Per stage (each rank of it): ";
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const StageTotals t = totals_of(stages[s].totals());
    out += fmt::format("{}stage {}: {} calls, {} B logical, {:.0f} B bus", s ? "; " : "", s, t.calls,
                       t.logical_bytes, t.bus_bytes);
  }
  return out + "\n";
}

std::string step_bytes_json(const RunSpec& spec, const std::vector<StepCommPlan>& stages) {
  nlohmann::json doc;
  doc["spec"] = to_json(spec);
  doc["units"] = "bytes; logical: the buffer a call moves (as the ledger counts it); bus: bytes on the wire per rank";
  doc["busiest_stage"] = busiest_stage(stages);
  nlohmann::json list = nlohmann::json::array();
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const std::map<LedgerKey, LedgerTotals> keys = stages[s].totals();
    const StageTotals t = totals_of(keys);
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& [key, k] : keys)
      rows.push_back({{"phase", key.phase},
                      {"group", key.group},
                      {"op", collective_name(key.op)},
                      {"group_size", k.group_size},
                      {"calls", k.calls},
                      {"logical_bytes", k.logical_bytes},
                      {"bus_bytes", k.bus_bytes}});
    list.push_back({{"stage", s}, {"calls", t.calls}, {"logical_bytes", t.logical_bytes}, {"bus_bytes", t.bus_bytes},
                    {"keys", rows}});
  }
  doc["stages"] = list;
  return doc.dump(2) + "\n";
}

}  // namespace mdtp::cost
