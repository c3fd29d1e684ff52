#include "cost/megatron_h100.hpp"

#include "cost/model_flops.hpp"

namespace mdtp::cost {

const std::vector<MeasuredRun>& megatron_h100_table() {
  // billions, heads, hidden, layers, TP, PP, GPUs, batch, TFLOP/s per GPU, MFU %
  static const std::vector<MeasuredRun> rows = {
      {1.7, 16, 2048, 24, 1, 1, 48, 192, 408.8, 41},      {7.1, 32, 4096, 30, 2, 1, 96, 192, 465.9, 47},
      {16, 48, 6144, 32, 4, 1, 192, 192, 489.1, 49},      {32, 56, 7168, 48, 8, 1, 384, 192, 459.6, 46},
      {70, 64, 8192, 84, 8, 2, 768, 384, 419.7, 42},      {119, 80, 10240, 92, 8, 4, 1536, 768, 420.5, 43},
      {177, 96, 12288, 96, 8, 6, 2304, 1152, 432.8, 44},  {314, 128, 16384, 96, 8, 8, 3072, 1536, 474.4, 48},
      {462, 144, 18432, 112, 8, 16, 6144, 3072, 459.9, 47},
  };
  return rows;
}

StepConfig megatron_h100_config(const MeasuredRun& row) {
  StepConfig c = measured_run_config(row, row.tp > 1 ? TpMode::d1_sp : TpMode::d1, 4096, 131072);
  c.spec.zero.stage = 1;  // the distributed optimizer
  c.spec.recompute = Recompute::none;
  c.attention_keeps_probabilities = false;  // Transformer Engine's fused (Flash) attention
  c.spec.precision = {DType::bf16, DType::f32, {}};
  c.spec.dropout = 0.1;
  c.overlap.dp_gradients = true;  // --overlap-grad-reduce
  c.overlap.param_gather = true;  // --overlap-param-gather
  c.overlap.tp_comm = true;       // --tp-comm-overlap
  c.overlap.pp_p2p = true;
  return c;
}

MeasuredTable megatron_h100_measured_table() {
  MeasuredTable t;
  t.key = "megatron-h100";
  t.title = "Megatron-LM README, weak scaling on H100";
  t.citation = "NVIDIA/Megatron-LM README, 'Performance Benchmarking', images/model_table.png (commit "
               "d98e8a64ddf34856e74b24714e3bedb2f5a39553): GPT 1.7B-462B on DGX H100, vocabulary 131072, "
               "sequence 4096, DP/TP/PP overlaps on";
  t.cluster = "dgx-h100";
  t.rule = "bf16 with f32 gradients, micro-batch 1, 1D TP with sequence parallelism, ZeRO-1 (distributed "
           "optimizer), no recomputation with Flash attention, dropout 0.1, interleaved with the smallest v > 1 "
           "dividing the layers per stage; gradient reduction, parameter gather, TP collectives (under their "
           "GEMMs) and pipeline sends overlapped";
  t.rows = megatron_h100_table();
  t.config = megatron_h100_config;
  t.flops = [](const StepConfig& c) { return model_flops(c.spec.model, c.spec.global_batch); };
  return t;
}

}  // namespace mdtp::cost
