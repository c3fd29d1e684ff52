#pragma once
// Validation against published measurements: the weak-scaling table of Narayanan et al. 2021,
// "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM" (SC 2021),
// Table 1 — GPT models from 1.7B to 1T parameters trained with Megatron-LM on Selene (DGX A100
// 80 GB nodes, 8 HDR InfiniBand HCAs each), sequence 2048, vocabulary 51200, full activation
// recomputation, mixed precision; per row the measured TFLOP/s per GPU (FLOPs counted as
// narayanan_flops, i.e. with the recomputed forward) and its % of the 312 TFLOP/s peak.
//
// What the table does not give per row is fixed by ONE rule for every row (docs/performance-
// model.md): micro-batch 1; without a pipeline plain gradient accumulation, with one the
// interleaved schedule with v = the smallest divisor > 1 of the layers per stage (1F1B when a stage
// has one layer); 1D tensor parallelism without sequence parallelism (Megatron's in 2021), fp16,
// ZeRO 0; and the overlap Megatron-LM had then: none (gradients all-reduced after backward,
// blocking pipeline sends).
#include <vector>

#include "cost/cluster.hpp"
#include "cost/step_model.hpp"

namespace mdtp::cost {

struct NarayananRow {
  double billions = 0.0;  // parameters, as the table states them
  int heads = 0, hidden = 0, layers = 0, tp = 0, pp = 0, gpus = 0, batch = 0;
  double tflops_per_gpu = 0.0;  // measured
  double percent_of_peak = 0.0;
};

// The ten rows, 1.7B … 1008B.
const std::vector<NarayananRow>& narayanan_table();

// The row as a StepConfig, by the rule above.
StepConfig narayanan_config(const NarayananRow& row);

struct ValidationRow {
  NarayananRow row;
  StepEstimate estimate;
  double predicted = 0.0;       // TFLOP/s per GPU
  double error = 0.0;           // (predicted − measured) / measured
  double baseline_error = 0.0;  // the same for the constant-efficiency baseline
};

struct Validation {
  std::vector<ValidationRow> rows;
  double baseline_tflops = 0.0;  // one figure for every row: the one with the least worst error
  double max_error = 0.0, mean_abs_error = 0.0, baseline_max_error = 0.0, baseline_mean_abs_error = 0.0;
};

Validation validate_narayanan(const Cluster& cluster);

}  // namespace mdtp::cost
