#pragma once
// The Megatron-LM README's weak-scaling table on H100: GPT models from 1.7B to 462B parameters,
// trained with Megatron-Core on DGX H100 clusters (up to 6144 GPUs), vocabulary 131072, sequence
// 4096, "fine-grained overlapping with DP (--overlap-grad-reduce, --overlap-param-gather), TP
// (--tp-comm-overlap), and PP (enabled by default)"; per row the measured TFLOP/s per GPU, counted
// as Megatron's num_floating_point_operations (model FLOPs: no recomputation is counted), and the
// MFU against the 989 TFLOP/s bf16 peak.  The table is an image in the repository
// (images/model_table.png at commit d98e8a64ddf34856e74b24714e3bedb2f5a39553); its nine rows are
// copied here as printed.
//
// What the table does not give per row, ONE rule for every row (docs/performance-model.md): the
// GPT-2 block (LayerNorm, GeLU, 4h MLP, tied head) as Megatron's GPT; bf16 with f32 gradients;
// micro-batch 1; 1D tensor parallelism WITH sequence parallelism (--tp-comm-overlap needs it); the
// distributed optimizer (ZeRO-1 over dp); no recomputation with a streaming (Flash) attention
// kernel; dropout 0.1 (Megatron's default); with a pipeline the interleaved schedule with v = the
// smallest divisor > 1 of the layers per stage; every overlap the README names on, as the step
// model expresses it (OverlapAssumptions: the gradient reduction, ZeRO-1's parameter gather, the
// TP collectives under their GEMMs, the pipeline sends).
#include <vector>

#include "cost/measured_tables.hpp"

namespace mdtp::cost {

// The nine rows, 1.7B … 462B.
const std::vector<MeasuredRun>& megatron_h100_table();

// The row as a StepConfig, by the rule above.
StepConfig megatron_h100_config(const MeasuredRun& row);

// The table for measured_tables(): dgx-h100, FLOPs counted as model_flops.
MeasuredTable megatron_h100_measured_table();

}  // namespace mdtp::cost
