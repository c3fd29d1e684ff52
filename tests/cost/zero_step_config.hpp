#pragma once
// The small ZeRO step the step-model tests price: 8 layers, hidden 1024, 16 heads, sequence 512,
// vocabulary 51200 (its wte outweighs two blocks), 1D tp 2 over dp 4 (one DGX node), dropout 0.1,
// two sequences per micro-batch, `micro_batches` per step, at ZeRO stage `zero`.
#include <cstdint>

#include "cost/step_config.hpp"

namespace mdtp::testing {

inline cost::StepConfig zero_step_config(int zero, std::int64_t micro_batches, DType dtype) {
  cost::StepConfig c;
  c.spec.precision = precision_for(dtype);
  c.spec.dropout = 0.1;
  c.spec.model = ModelShape{8, 1024, 16, 512, 51200};
  c.spec.layout.mode = TpMode::d1;
  c.spec.layout.tp = 2;
  c.spec.layout.dp = 4;
  c.spec.zero.stage = zero;
  c.spec.layout.micro_batches = static_cast<int>(micro_batches);
  c.spec.global_batch = micro_batches * 2 * c.spec.layout.dp;
  return c;
}

}  // namespace mdtp::testing
