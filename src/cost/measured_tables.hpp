#pragma once
// Published tables of measured training runs, and the step model held against them (`mdtp plan
// --validate`).  Each table states its hardware, how it counts FLOPs and what its rows leave out;
// what a row does not give is fixed by ONE rule per table (its `config`), written from the
// publication's stated setup, never fitted to its numbers.  Nothing in the model is tuned on these
// rows: they are how a user (and the tests) see how far the predictions are from real clusters.
//
//   narayanan-2021   Narayanan et al. 2021 (SC '21), Table 1: GPT 1.7B-1T on Selene (DGX A100)
//   megatron-h100    the Megatron-LM README's weak-scaling table (images/model_table.png): GPT
//                    2B-462B on DGX H100, all overlaps on
#include <string>
#include <vector>

#include "cost/cluster.hpp"
#include "cost/step_model.hpp"

namespace mdtp::cost {

// One measured run, as such tables print it.
struct MeasuredRun {
  double billions = 0.0;  // parameters, as the table states them
  int heads = 0, hidden = 0, layers = 0, tp = 0, pp = 0, gpus = 0, batch = 0;
  double tflops_per_gpu = 0.0;  // measured, counted as the table counts (MeasuredTable::flops)
  double percent_of_peak = 0.0;
};

struct MeasuredTable {
  std::string key;       // "narayanan-2021", "megatron-h100"
  std::string title;     // printed above the table
  std::string citation;  // where the numbers are, exactly
  std::string cluster;   // the cluster preset of the hardware it was measured on
  std::string rule;      // what the rows do not say, and how `config` fixes it
  std::vector<MeasuredRun> rows;
  StepConfig (*config)(const MeasuredRun&) = nullptr;
  // The FLOPs of one step as the table counts them, from which its TFLOP/s per GPU follow.
  double (*flops)(const StepConfig&) = nullptr;
};

// Every shipped table, in the order --validate prints them.
const std::vector<MeasuredTable>& measured_tables();
const MeasuredTable& measured_table(const std::string& key);  // an mdtp::Error names the keys

struct ValidationRow {
  MeasuredRun row;
  StepEstimate estimate;
  double predicted = 0.0;       // TFLOP/s per GPU, counted as the table counts
  double error = 0.0;           // (predicted − measured) / measured
  double baseline_error = 0.0;  // the same for the constant-throughput baseline
};

struct Validation {
  const MeasuredTable* table = nullptr;
  std::vector<ValidationRow> rows;
  double baseline_tflops = 0.0;  // one figure for every row: the one with the least worst error
  double max_error = 0.0, mean_abs_error = 0.0, baseline_max_error = 0.0, baseline_mean_abs_error = 0.0;
  // Spearman's rank correlation of predicted and measured TFLOP/s over the rows (ties averaged):
  // whether the model orders the table's runs as they measured.
  double spearman = 0.0;
  // The pairs of rows whose measured TFLOP/s differ by more than 10 % (the larger over the smaller),
  // and how many of them the model predicts in the measured order: the order a user choosing
  // between configurations relies on.
  int distinct_pairs = 0, distinct_pairs_ordered = 0;
};

// The pair count of Validation over parallel series of measured and predicted values.
struct PairOrder {
  int pairs = 0, ordered = 0;
};
PairOrder distinct_pair_order(const std::vector<double>& measured, const std::vector<double>& predicted,
                              double apart = 0.10);

Validation validate(const MeasuredTable& table, const Cluster& cluster);

// What every table's rule shares: the GPT block at the table's sequence and vocabulary, the row's
// batch, tp, pp and dp = GPUs / (tp·pp) in `mode`, micro-batch 1, and with a pipeline the
// interleaved schedule with v = the smallest divisor > 1 of the layers per stage (1F1B when the
// stage has one layer).  Precision, ZeRO, recomputation and overlap are each table's own.
StepConfig measured_run_config(const MeasuredRun& row, TpMode mode, std::int64_t seq, std::int64_t vocab);

// Spearman's ρ of two equally long series (average ranks for ties); 0 for fewer than 2 values.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace mdtp::cost
