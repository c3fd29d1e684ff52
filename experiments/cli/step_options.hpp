#pragma once
// One GPT step configuration as the command line gives it, shared by `mdtp plan` (one
// configuration) and `mdtp cost` (the whole-step form), so both resolve it the same way.
#include <string>

#include "cost/step_config.hpp"

namespace mdtp::cli {

struct StepChoice {
  cost::GptShape model;
  std::int64_t global_batch = 0, micro_batch = 1;
  TpMode mode = TpMode::d1;
  int tp = 1, depth = 1, pp = 1, gpus = 0, chunks = 1, zero = 0;
  std::string schedule = "1f1b", recompute = "none";
  DType dtype = DType::bf16;
  bool dropout = true;
  cost::OverlapAssumptions overlap{};
  bool attention_keeps_probabilities = true;  // false: --streaming-attention
  bool zero_reduce_per_micro_batch = false;   // --zero-reduce-per-micro-batch
  bool zero_keep_parameters = false;          // --zero-keep-params
};

// dp = gpus / (tp · pp); an mdtp::Error naming the value when it does not divide, or for an
// unknown schedule or recomputation.
cost::StepConfig step_config(const StepChoice& choice);

}  // namespace mdtp::cli
