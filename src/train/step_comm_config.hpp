#pragma once
// The whole-step communication plan (cost/gpt_step_comm.hpp) of a training run: the trainer's
// resolved configuration as the plan takes it, the plan's largest figures over the stages (what
// the ledger table reports of the measurement: its maximum over ranks), and the ledger table with
// the model beside the measurement.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "comm/ledger_stats.hpp"
#include "cost/gpt_step_comm.hpp"
#include "io/table.hpp"
#include "train/train_setup.hpp"
#include "train/trainer.hpp"

namespace mdtp {

cost::StepCommConfig step_comm_config(const TrainPlan& plan);

// Per key, the largest calls and logical bytes over the pipeline stages (every rank of a stage
// issues the same calls): what `reduce_ledger_stats` reports as the maximum over ranks.
std::map<LedgerKey, LedgerTotals> step_comm_max_over_stages(const cost::StepCommConfig& config);

// The trainer's model of a run, or nothing when the plan does not cover the configuration; then
// `why_not` says why (the run itself goes on; its table says -1 in the model columns and its
// record carries the reason, so a mismatch is never silently skipped).
std::optional<std::map<LedgerKey, LedgerTotals>> step_comm_model(const TrainPlan& plan, std::string& why_not);

// The `ledger` table of a train run: per step and (phase, group, op), the measurement (maximum
// and mean over ranks) and the model's calls and logical bytes (its maximum over stages).
Table ledger_table();
// One step's rows: every measured key, then any key only the model has (measured as zero).
void add_ledger_rows(Table& table, std::int64_t step, const std::vector<LedgerStat>& stats,
                     const std::optional<std::map<LedgerKey, LedgerTotals>>& model);
// "communication: 9 of 9 (phase, group, op) equal the model; 103312 B measured, 103312 B modelled
// (largest rank per key)".
// Without a model: "communication: no model for this configuration (WHY)".
std::string ledger_summary(const std::vector<LedgerStat>& stats,
                           const std::optional<std::map<LedgerKey, LedgerTotals>>& model, const std::string& why_not);

}  // namespace mdtp
