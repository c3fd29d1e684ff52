#pragma once
// What the cost model (src/cost) predicts for one benchmark step, keyed like the measurements so
// the drivers can put them side by side: per (phase, group, op) calls, bytes and α-β seconds
// (from the exact collective list of cost::plan_step), compute seconds per phase, and memory
// per rank by category.  This file is the drivers' only contact with the cost model's API.
#include <map>
#include <string>

#include "comm/ledger.hpp"
#include "cost/cost_model.hpp"
#include "cost/time_model.hpp"

namespace mdtp::bench {

struct PredictedComm {
  int group_size = 0;
  std::int64_t calls = 0;
  std::int64_t logical_bytes = 0;
  double bus_bytes = 0.0;
  double seconds = 0.0;
  std::string link;        // link class the time was charged at
  std::string algorithms;  // the algorithms the time model assumed, e.g. "binomial_tree+ring"
};

struct Prediction {
  std::map<LedgerKey, PredictedComm> comm;       // one step, one rank
  std::map<std::string, double> compute_seconds;  // per phase (forward, backward, grad-sync)
  // Per mem_category_name, and "total": parameters, gradients, optimizer_state (0: no optimizer
  // runs), activations = kept for backward + the returned output; total = their sum.
  std::map<std::string, double> memory_bytes;
  double gemm_flops = 0.0;  // per rank and step
  double comm_seconds(const std::string& phase = "") const;  // "" = the whole step
  double compute_total() const;
};

// plan_step + predict_plan (communication), plan_gemms at the model's GEMM rate (compute: GEMMs
// only, as the compute model counts them), estimate_memory (memory).
Prediction predict(const cost::Workload& workload, const cost::TimeModel& model);

}  // namespace mdtp::bench
