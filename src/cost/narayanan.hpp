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

#include "cost/measured_tables.hpp"

namespace mdtp::cost {

// The ten rows, 1.7B … 1008B.
const std::vector<MeasuredRun>& narayanan_table();

// The row as a StepConfig, by the rule above.
StepConfig narayanan_config(const MeasuredRun& row);

// The table for measured_tables(): dgx-a100, FLOPs counted as narayanan_flops (the recomputed
// forward included).
MeasuredTable narayanan_measured_table();

}  // namespace mdtp::cost
