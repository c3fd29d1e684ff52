#pragma once
// The whole-step communication plan (cost/gpt_step_comm.hpp) of a training run: the trainer's
// resolved configuration as the plan takes it, and the plan per (phase, group, op) for one stage
// or, as the trainer's ledger table reports measurements, the largest over the stages.
#include <map>

#include "cost/gpt_step_comm.hpp"
#include "train/train_setup.hpp"
#include "train/trainer.hpp"

namespace mdtp {

cost::StepCommConfig step_comm_config(const TrainConfig& config, const TrainPlan& plan);

// Per key, the largest calls and logical bytes over the pipeline stages (every rank of a stage
// issues the same calls): what `reduce_ledger_stats` reports as the maximum over ranks.
std::map<LedgerKey, LedgerTotals> step_comm_max_over_stages(const cost::StepCommConfig& config);

}  // namespace mdtp
