#include "train/step_comm_config.hpp"
#include "spec/names.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace mdtp {

cost::StepCommConfig step_comm_config(const TrainPlan& plan) {
  // The trainer's TP context uses the default options.
  return cost::StepCommConfig{.spec = plan.spec, .options = TpOptions{}, .align_bytes = plan.zero.align_bytes};
}

std::map<LedgerKey, LedgerTotals> step_comm_max_over_stages(const cost::StepCommConfig& config) {
  std::map<LedgerKey, LedgerTotals> out;
  for (int stage = 0; stage < config.spec.layout.pp; ++stage)
    for (const auto& [key, t] : cost::plan_step_comm(config, stage).totals()) {
      LedgerTotals& m = out[key];
      m.calls = std::max(m.calls, t.calls);
      m.logical_bytes = std::max(m.logical_bytes, t.logical_bytes);
      m.bus_bytes = std::max(m.bus_bytes, t.bus_bytes);
      m.group_size = std::max(m.group_size, t.group_size);
    }
  return out;
}

std::optional<std::map<LedgerKey, LedgerTotals>> step_comm_model(const TrainPlan& plan, std::string& why_not) {
  // The plan groups its data-parallel and model-parallel calls under the engine's default names.
  const ZeroConfig& zero = plan.zero;
  if (zero.data_parallel_group != group::dp || zero.model_parallel_group != group::tp_pp) {
    why_not = fmt::format("the ZeRO engine reduces over the groups '{}' and '{}'; the plan knows only '{}' and '{}'",
                          zero.data_parallel_group, zero.model_parallel_group, group::dp, group::tp_pp);
    return std::nullopt;
  }
  try {
    why_not.clear();
    return step_comm_max_over_stages(step_comm_config(plan));
  } catch (const Error& e) {
    why_not = std::string("the whole-step plan refuses this configuration: ") + e.what();
    return std::nullopt;
  }
}

Table ledger_table() {
  Table t;
  t.integer("step").text("phase").text("group").text("op").integer("group_size").real("calls").real("logical_bytes")
      .real("bus_bytes").real("seconds_mean").real("seconds_max").real("model_calls").real("model_logical_bytes");
  // Sync timing (comm/ledger.hpp): the wait for the last peer, apart from seconds (the transfer).
  t.real("wait_mean").real("wait_max").real("synchronised_calls");
  return t;
}

void add_ledger_rows(Table& table, std::int64_t step, const std::vector<LedgerStat>& stats,
                     const std::optional<std::map<LedgerKey, LedgerTotals>>& model) {
  auto modelled = [&](const LedgerKey& key, auto field) -> double {
    if (!model) return -1.0;
    const auto it = model->find(key);
    return it == model->end() ? 0.0 : static_cast<double>(field(it->second));
  };
  auto calls = [](const LedgerTotals& t) { return t.calls; };
  auto bytes = [](const LedgerTotals& t) { return t.logical_bytes; };
  for (const LedgerStat& stat : stats)
    table.row()(step)(stat.key.phase)(stat.key.group)(collective_name(stat.key.op))(stat.group_size)(stat.calls.max)(
        stat.logical_bytes.max)(stat.bus_bytes.max)(stat.seconds.mean)(stat.seconds.max)(modelled(stat.key, calls))(
        modelled(stat.key, bytes))(stat.wait_seconds.mean)(stat.wait_seconds.max)(stat.synchronised_calls.max);
  if (!model) return;
  for (const auto& [key, t] : *model)
    if (std::none_of(stats.begin(), stats.end(), [&](const LedgerStat& s) { return s.key == key; }))
      table.row()(step)(key.phase)(key.group)(collective_name(key.op))(t.group_size)(0.0)(0.0)(0.0)(0.0)(0.0)(
          static_cast<double>(t.calls))(static_cast<double>(t.logical_bytes))(0.0)(0.0)(0.0);
}

std::string ledger_summary(const std::vector<LedgerStat>& stats,
                           const std::optional<std::map<LedgerKey, LedgerTotals>>& model, const std::string& why_not) {
  if (!model) return "communication: no model for this configuration (" + why_not + ")";
  double measured = 0.0, modelled = 0.0;
  std::size_t equal = 0, keys = model->size();
  for (const LedgerStat& s : stats) {
    measured += s.logical_bytes.max;
    const auto it = model->find(s.key);
    if (it == model->end()) {
      ++keys;
      continue;
    }
    if (s.calls.max == static_cast<double>(it->second.calls) &&
        s.logical_bytes.max == static_cast<double>(it->second.logical_bytes))
      ++equal;
  }
  for (const auto& [key, t] : *model) modelled += static_cast<double>(t.logical_bytes);
  return fmt::format("communication per step: {} of {} (phase, group, op) equal the model; {:.0f} B measured, {:.0f} B "
                     "modelled (largest rank per key)",
                     equal, keys, measured, modelled);
}

}  // namespace mdtp
