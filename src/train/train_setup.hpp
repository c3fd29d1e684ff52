#pragma once
// Everything `mdtp train` can refuse, resolved on every rank alike before the first collective:
// the mesh (tp · pp · dp = world), the model's shape (options, checkpoint, data), the token data,
// the pipeline's stage partition and schedule (proved to complete by the simulator), and the
// micro-batch size.  Pure apart from reading the data and checkpoint files.
#include <cstdint>

#include "io/token_data.hpp"
#include "plan/schedule.hpp"
#include "plan/stage_partition.hpp"
#include "train/trainer.hpp"

namespace mdtp {

struct TrainPlan {
  MeshConfig mesh;
  int dp = 1;
  GptConfig model;
  TokenData data;
  StagePartition partition;
  Schedule schedule;
  std::int64_t micro_batch = 1;  // sequences per micro-batch per replica: batch / (dp · m)
};

TrainPlan plan_training(const TrainConfig& config, int world_size);

}  // namespace mdtp
