#pragma once
// Everything `mdtp train` can refuse, resolved on every rank alike before the first collective:
// the run spec's model shape (options, checkpoint, data) and dp (tp · pp · dp = world), what the
// engine cannot honour (a precision, dropout or model family it lacks), the output paths, the
// token data, the pipeline's stage partition and schedule (proved to complete by the simulator),
// and the micro-batch size.  Pure apart from reading the data and checkpoint files.
#include <cstdint>

#include "io/token_data.hpp"
#include "plan/schedule.hpp"
#include "plan/stage_partition.hpp"
#include "train/trainer.hpp"

namespace mdtp {

struct TrainPlan {
  RunSpec spec;  // resolved: every model size and dp given, validated
  MeshConfig mesh;
  TokenData data;
  StagePartition partition;
  Schedule schedule;
  std::int64_t micro_batch = 1;  // sequences per micro-batch per replica: global batch / (dp · m)
  ZeroConfig zero;  // the engine's ZeRO configuration: spec.zero and the engine's own choices
  int dp() const { return spec.layout.dp; }
};

TrainPlan plan_training(const TrainConfig& config, int world_size);

}  // namespace mdtp
