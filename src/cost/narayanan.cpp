#include "cost/narayanan.hpp"

#include <algorithm>
#include <cmath>

namespace mdtp::cost {

const std::vector<NarayananRow>& narayanan_table() {
  // billions, heads, hidden, layers, TP, PP, GPUs, batch, TFLOP/s per GPU, % of peak
  static const std::vector<NarayananRow> rows = {
      {1.7, 24, 2304, 24, 1, 1, 32, 512, 137, 44},       {3.6, 32, 3072, 30, 2, 1, 64, 512, 138, 44},
      {7.5, 32, 4096, 36, 4, 1, 128, 512, 142, 46},      {18.4, 48, 6144, 40, 8, 1, 256, 1024, 135, 43},
      {39.1, 64, 8192, 48, 8, 2, 512, 1536, 138, 44},    {76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140, 45},
      {145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148, 47}, {310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155, 50},
      {529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163, 52}, {1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163, 52},
  };
  return rows;
}

StepConfig narayanan_config(const NarayananRow& row) {
  StepConfig c;
  c.spec.model = ModelShape{row.layers, row.hidden, row.heads, 2048, 51200};
  c.spec.global_batch = row.batch;
  c.spec.layout.mode = TpMode::d1;
  c.spec.layout.tp = row.tp;
  c.spec.layout.pp = row.pp;
  c.spec.layout.dp = row.gpus / (row.tp * row.pp);
  c.set_micro_batch(1);
  c.spec.zero.stage = 0;
  c.spec.recompute = Recompute::full;
  c.spec.precision = {DType::f16, DType::f16, {}};  // fp16 with fp16 gradients, as those runs reduced them
  c.spec.dropout = 0.1;  // GPT-3 and Megatron train with dropout 0.1
  c.overlap.dp_gradients = false;
  c.overlap.pp_p2p = false;
  c.spec.layout.schedule = ScheduleKind::one_f_one_b;
  c.spec.layout.chunks = 1;
  const int per_stage = row.layers / row.pp;
  if (row.pp > 1)
    for (int v = 2; v <= per_stage; ++v)
      if (per_stage % v == 0) {
        c.spec.layout.schedule = ScheduleKind::interleaved;
        c.spec.layout.chunks = v;
        break;
      }
  return c;
}

Validation validate_narayanan(const Cluster& cluster) {
  Validation v;
  const auto& table = narayanan_table();
  double lo = table.front().tflops_per_gpu, hi = lo;
  for (const auto& r : table) {
    lo = std::min(lo, r.tflops_per_gpu);
    hi = std::max(hi, r.tflops_per_gpu);
  }
  // The constant c minimising max |c/x − 1| over the measured x: c/lo − 1 = 1 − c/hi.
  v.baseline_tflops = 2.0 / (1.0 / lo + 1.0 / hi);
  for (const auto& r : table) {
    ValidationRow row;
    row.row = r;
    row.estimate = estimate_step(narayanan_config(r), cluster);
    row.predicted = row.estimate.tflops_per_gpu;
    row.error = (row.predicted - r.tflops_per_gpu) / r.tflops_per_gpu;
    row.baseline_error = (v.baseline_tflops - r.tflops_per_gpu) / r.tflops_per_gpu;
    v.max_error = std::max(v.max_error, std::abs(row.error));
    v.baseline_max_error = std::max(v.baseline_max_error, std::abs(row.baseline_error));
    v.mean_abs_error += std::abs(row.error) / static_cast<double>(table.size());
    v.baseline_mean_abs_error += std::abs(row.baseline_error) / static_cast<double>(table.size());
    v.rows.push_back(row);
  }
  return v;
}

}  // namespace mdtp::cost
