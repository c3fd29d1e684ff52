#include "cost/narayanan.hpp"

#include "cost/model_flops.hpp"

namespace mdtp::cost {

const std::vector<MeasuredRun>& narayanan_table() {
  // billions, heads, hidden, layers, TP, PP, GPUs, batch, TFLOP/s per GPU, % of peak
  static const std::vector<MeasuredRun> rows = {
      {1.7, 24, 2304, 24, 1, 1, 32, 512, 137, 44},       {3.6, 32, 3072, 30, 2, 1, 64, 512, 138, 44},
      {7.5, 32, 4096, 36, 4, 1, 128, 512, 142, 46},      {18.4, 48, 6144, 40, 8, 1, 256, 1024, 135, 43},
      {39.1, 64, 8192, 48, 8, 2, 512, 1536, 138, 44},    {76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140, 45},
      {145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148, 47}, {310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155, 50},
      {529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163, 52}, {1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163, 52},
  };
  return rows;
}

StepConfig narayanan_config(const MeasuredRun& row) {
  StepConfig c = measured_run_config(row, TpMode::d1, 2048, 51200);
  c.spec.zero.stage = 0;
  c.spec.recompute = Recompute::full;
  c.spec.precision = {DType::f16, DType::f16, {}};  // fp16 with fp16 gradients, as those runs reduced them
  c.spec.dropout = 0.1;  // GPT-3 and Megatron train with dropout 0.1
  c.overlap.dp_gradients = false;
  c.overlap.pp_p2p = false;
  // Megatron-LM of 2021 added each micro-batch's weight gradient into main_grad in a backward hook
  // (param.main_grad.add_(grad)); the fusion into the GEMM came later.
  c.gradient_accumulation_fusion = false;
  return c;
}

MeasuredTable narayanan_measured_table() {
  MeasuredTable t;
  t.key = "narayanan-2021";
  t.title = "Narayanan et al. 2021, Table 1";
  t.citation = "D. Narayanan et al., Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM, "
               "SC '21, Table 1 (weak scaling, 1.7B-1T, Selene: DGX A100 80 GB, 8 HDR InfiniBand HCAs per node)";
  t.cluster = "dgx-a100";
  t.rule = "sequence 2048, vocabulary 51200, fp16, full recomputation, dropout 0.1 (the paper); micro-batch 1, "
           "1D TP without sequence parallelism, interleaved with the smallest v > 1 dividing the layers per stage, "
           "no overlap of gradients or pipeline sends, weight gradients accumulated by a separate kernel (Megatron-LM of "
           "2021)";
  t.rows = narayanan_table();
  t.config = narayanan_config;
  t.flops = [](const StepConfig& c) { return narayanan_flops(c.spec.model, c.spec.global_batch); };
  return t;
}

}  // namespace mdtp::cost
