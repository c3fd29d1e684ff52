#include "train/step_comm_config.hpp"

#include <algorithm>

namespace mdtp {

cost::StepCommConfig step_comm_config(const TrainConfig& tc, const TrainPlan& plan) {
  cost::StepCommConfig c;
  c.model = cost::GptShape{plan.model.n_layer, plan.model.n_embd, plan.model.n_head, plan.model.block_size,
                           plan.model.vocab_size};
  c.micro_batch = plan.micro_batch;
  c.mesh = plan.mesh;
  c.options = TpOptions{};  // the trainer's TP context uses the default options
  c.schedule = plan.schedule.kind;
  c.micro_batches = plan.schedule.micro_batches;
  c.chunks = plan.schedule.chunks;
  c.pp_layers = plan.partition.blocks();
  c.group_size = plan.schedule.kind == ScheduleKind::interleaved ? plan.schedule.group_size : 0;
  c.dtype = tc.dtype;
  c.zero_stage = tc.zero.stage;
  c.bucket_mb = tc.zero.bucket_mb;
  c.align_bytes = tc.zero.align_bytes;
  c.keep_parameters = tc.zero.keep_parameters_for_step;
  return c;
}

std::map<LedgerKey, LedgerTotals> step_comm_max_over_stages(const cost::StepCommConfig& config) {
  std::map<LedgerKey, LedgerTotals> out;
  for (int stage = 0; stage < config.mesh.pp; ++stage)
    for (const auto& [key, t] : cost::plan_step_comm(config, stage).totals()) {
      LedgerTotals& m = out[key];
      m.calls = std::max(m.calls, t.calls);
      m.logical_bytes = std::max(m.logical_bytes, t.logical_bytes);
      m.bus_bytes = std::max(m.bus_bytes, t.bus_bytes);
      m.group_size = std::max(m.group_size, t.group_size);
    }
  return out;
}

}  // namespace mdtp
