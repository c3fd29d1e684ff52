#include "train/train_setup.hpp"

#include "plan/schedule_sim.hpp"

namespace mdtp {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The model shape: explicit values, else the checkpoint's (explicit ones must then agree), else
// the data's vocabulary and row length, else the defaults.
GptConfig resolve_model(const TrainConfig& tc, const TokenData* hdf5_data) {
  GptConfig m = tc.model;
  if (!tc.init_from.empty()) {
    const GptConfig saved = read_checkpoint_config(tc.init_from);
    auto take = [&](std::int64_t& value, std::int64_t from_file, const char* option) {
      require(value == 0 || value == from_file, "--init-from ", tc.init_from, " holds a model with ", option, " ",
              from_file, " but ", option, " ", value, " was given");
      value = from_file;
    };
    take(m.vocab_size, saved.vocab_size, "--vocab");
    take(m.n_layer, saved.n_layer, "--layers");
    take(m.n_head, saved.n_head, "--heads");
    take(m.n_embd, saved.n_embd, "--embd");
    take(m.block_size, saved.block_size, "--seq");
  }
  if (m.block_size == 0) m.block_size = hdf5_data ? hdf5_data->seq : kDefaultModel.block_size;
  if (m.n_layer == 0) m.n_layer = kDefaultModel.n_layer;
  if (m.n_head == 0) m.n_head = kDefaultModel.n_head;
  if (m.n_embd == 0) m.n_embd = kDefaultModel.n_embd;
  return m;
}

}  // namespace

TrainPlan plan_training(const TrainConfig& tc, int world_size) {
  TrainPlan plan{.mesh = {}, .dp = 1, .model = {}, .data = {}, .partition = StagePartition(1, 1, 1), .schedule = {},
                 .micro_batch = 1};
  plan.mesh.world = world_size;
  plan.mesh.tp = tc.tp;
  plan.mesh.pp = tc.pp;
  plan.mesh.tp_mode = tc.tp_mode;
  plan.mesh.tp_depth = tc.tp_depth;
  const Topology topology(plan.mesh);  // validates tp · pp against the world and the mode's grid
  plan.dp = topology.dp();
  require(tc.steps >= 0, "--steps must be >= 0; got ", tc.steps);
  require(tc.micro_batches >= 1, "--micro-batches must be >= 1; got ", tc.micro_batches);
  const std::int64_t per_step = static_cast<std::int64_t>(plan.dp) * tc.micro_batches;
  require(tc.batch > 0 && tc.batch % per_step == 0, "the global batch --batch ", tc.batch,
          " must be a positive multiple of dp × micro-batches = ", plan.dp, " × ", tc.micro_batches, " = ", per_step,
          " (dp = world ", world_size, " / (tp ", tc.tp, " × pp ", tc.pp, "))");
  plan.micro_batch = tc.batch / per_step;
  require(tc.dtype == DType::f32 || tc.dtype == DType::f64, "--dtype must be f32 or f64 on the host; got ",
          dtype_name(tc.dtype));
  validate(tc.zero, tc.optimizer);

  const bool text = tc.data.empty() || ends_with(tc.data, ".txt");
  if (!text) plan.data = read_token_file(tc.data);
  plan.model = resolve_model(tc, text ? nullptr : &plan.data);
  if (text) plan.data = text_corpus_tokens(tc.data.empty() ? find_default_corpus() : tc.data, plan.model.block_size);
  if (plan.model.vocab_size == 0) plan.model.vocab_size = plan.data.vocab_size;
  validate(plan.model);
  check_token_data(plan.data, plan.model.vocab_size, plan.model.block_size, tc.batch);

  plan.partition = StagePartition(static_cast<int>(plan.model.n_layer), tc.pp, tc.chunks, tc.pp_layers);
  plan.schedule = make_schedule(tc.schedule, tc.pp, tc.micro_batches, tc.chunks, tc.group_size);
  simulate(plan.schedule, PassTimes{});  // proves it completes and its channels match in order
  return plan;
}

}  // namespace mdtp
