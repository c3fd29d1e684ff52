#pragma once
// The small training runs that the train and memory tests vary: a TP mode and size, a pipeline
// and its schedule, a ZeRO stage — on the tests' small GPT (4 layers, 4 heads, embedding 32,
// T = 16) with 4 KB ZeRO buckets (many buckets in a small model).
#include <string>

#include "train/trainer.hpp"

namespace mdtp::testing {

struct TrainShape {
  std::string label;
  TpMode mode = TpMode::none;
  int tp = 1, pp = 1, micro_batches = 1, zero = 0;
  ScheduleKind schedule = ScheduleKind::one_f_one_b;
};

// `sequences` per replica and micro-batch (dp = world / (tp · pp)), two steps.
inline TrainConfig small_train_config(const TrainShape& s, int world, int sequences = 2) {
  TrainConfig t;
  t.spec.layout.mode = s.mode;
  t.spec.layout.tp = s.tp;
  t.spec.layout.pp = s.pp;
  t.spec.layout.schedule = s.schedule;
  t.spec.layout.micro_batches = s.micro_batches;
  t.spec.zero.stage = s.zero;
  t.spec.zero.bucket_mb = 0.004;
  t.spec.model = ModelShape{4, 32, 4, 16, 0};
  t.spec.global_batch = sequences * world / (s.tp * s.pp) * s.micro_batches;
  t.steps = 2;
  return t;
}

}  // namespace mdtp::testing
