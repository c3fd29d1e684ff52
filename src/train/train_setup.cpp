#include "train/train_setup.hpp"

#include "io/output_path.hpp"
#include "mesh/tp_mode.hpp"
#include "model/attention.hpp"
#include "plan/schedule_sim.hpp"
#include "train/hf_checkpoint.hpp"

namespace mdtp {
namespace {

// The model shape: explicit values, else the checkpoint's (explicit ones must then agree), else
// the data's vocabulary and row length, else the defaults.
ModelShape resolve_model(const TrainConfig& tc, const TokenData* hdf5_data) {
  ModelShape m = tc.spec.model;
  if (!tc.init_from.empty()) {
    const ModelShape saved = read_checkpoint_config(tc.init_from);
    auto take = [&](std::int64_t& value, std::int64_t from_file, const char* option) {
      require(value == 0 || value == from_file, "--init-from ", tc.init_from, " holds a model with ", option, " ",
              from_file, " but ", option, " ", value, " was given");
      value = from_file;
    };
    take(m.vocab, saved.vocab, "--vocab");
    take(m.layers, saved.layers, "--layers");
    take(m.heads, saved.heads, "--heads");
    take(m.hidden, saved.hidden, "--hidden");
    take(m.seq, saved.seq, "--seq");
    require(m.family == saved.family, "--init-from ", tc.init_from, " holds a ", model_family_name(saved.family),
            " model but --model ", model_family_name(m.family), " was given");
    if (m.family == ModelFamily::llama) {
      take(m.ffn_hidden, saved.ffn(), "--ffn-hidden");
      take(m.kv_heads, saved.kv(), "--kv-heads");
      // θ, ε and the tie come from the file; flags that disagree are refused when it loads.
      m.rope_theta = saved.rope_theta;
      m.norm_eps = saved.norm_eps;
    }
    m.tied_head = saved.tied_head;  // gpt2 files may hold an untied head too
  }
  if (m.seq == 0) m.seq = hdf5_data ? hdf5_data->seq : kDefaultModel.seq;
  if (m.layers == 0) m.layers = kDefaultModel.layers;
  if (m.heads == 0) m.heads = kDefaultModel.heads;
  if (m.hidden == 0) m.hidden = kDefaultModel.hidden;
  return m;
}

// What the spec can say and the engine cannot run yet, refused by name (the cost model and the
// planner still take it).
void require_engine_supports(const RunSpec& spec) {
  const DType dtype = spec.precision.params;
  // Under bf16 the gradients are f32 (the default) or bf16; otherwise the parameters' own dtype.
  require(spec.precision.grad_reduce == dtype || (is_16bit(dtype) && spec.precision.grad_reduce == DType::f32),
          "--grad-reduce-dtype ", dtype_name(spec.precision.grad_reduce), " with --dtype ", dtype_name(dtype),
          ": mdtp train keeps gradients in the parameters' dtype", is_16bit(dtype) ? " or f32" : "");
  require(spec.dropout == 0.0, "mdtp train runs without dropout; got --dropout ", spec.dropout,
          " (mdtp cost and mdtp plan model dropout's masks)");
  // The model family (GPT-2 blocks only) is the model's own check: validate(ModelShape) below.
}

// Outputs are checked now, as the inputs are: a path that could not be written at the end would
// otherwise lose a whole run's results.
void check_outputs(const TrainConfig& tc) {
  if (!tc.out.empty()) check_hdf5_output(tc.out, "--out");
  if (!tc.save.empty() && !is_hf_checkpoint(tc.save)) check_hdf5_output(tc.save, "--save");  // else once the model is known
  if (!tc.dump_grads.empty()) check_hdf5_output(tc.dump_grads, "--dump-grads");
}

}  // namespace

RunSpec unresolved_train_spec() {
  RunSpec spec;
  spec.model.layers = spec.model.hidden = spec.model.heads = spec.model.seq = spec.model.vocab = 0;
  spec.layout.dp = 0;
  return spec;
}

TrainPlan plan_training(const TrainConfig& tc, int world_size) {
  TrainPlan plan{.spec = tc.spec, .mesh = {}, .data = {}, .partition = StagePartition(1, 1, 1),
                 .schedule = {}, .micro_batch = 1, .zero = {}};
  RunSpec& spec = plan.spec;
  ParallelLayout& layout = spec.layout;
  plan.mesh = mesh_config(layout, world_size);
  const Topology topology(plan.mesh);  // validates tp · pp against the world and the mode's grid
  require(layout.dp == 0 || layout.dp == topology.dp(), "dp ", layout.dp, " x tp ", layout.tp, " x pp ", layout.pp,
          " = ", layout.dp * layout.tp * layout.pp, " must equal the world's ", world_size, " ranks");
  layout.dp = topology.dp();
  require(tc.steps >= 0, "--steps must be >= 0; got ", tc.steps);
  require(layout.micro_batches >= 1, "--micro-batches must be >= 1; got ", layout.micro_batches);
  const std::int64_t per_step = static_cast<std::int64_t>(layout.dp) * layout.micro_batches;
  require(spec.global_batch > 0 && spec.global_batch % per_step == 0, "the global batch --global-batch ",
          spec.global_batch, " must be a positive multiple of dp × micro-batches = ", layout.dp, " × ",
          layout.micro_batches, " = ", per_step, " (dp = world ", world_size, " / (tp ", layout.tp, " × pp ", layout.pp,
          "))");
  plan.micro_batch = spec.micro_batch_size();
  require_engine_supports(spec);
  plan.zero = ZeroConfig{spec.zero};
  validate(plan.zero, spec.optimizer);
  check_outputs(tc);

  const bool text = tc.data.empty() || tc.data.ends_with(".txt");
  if (!text) plan.data = read_token_file(tc.data);
  spec.model = resolve_model(tc, text ? nullptr : &plan.data);
  // The tp.kv groups follow the resolved model (its key/value heads may come from --init-from).
  plan.mesh = mesh_config(layout, world_size, spec.model.kv());
  if (text) plan.data = text_corpus_tokens(tc.data.empty() ? find_default_corpus() : tc.data, spec.model.seq);
  if (spec.model.vocab == 0) spec.model.vocab = plan.data.vocab;
  validate(spec.model);
  if (!tc.save.empty() && is_hf_checkpoint(tc.save)) check_hf_output(tc.save, spec.model, "--save");
  check_token_data(plan.data, spec.model.vocab, spec.model.seq, spec.global_batch);

  plan.partition = stage_partition(spec);
  plan.schedule = make_schedule(layout.schedule, layout.pp, layout.micro_batches, layout.chunks, layout.group_size);
  simulate(plan.schedule, PassTimes{});  // proves it completes and its channels match in order
  validate(spec);  // the spec's own rules, after the engine's messages that name the flags
  // The heads must split over the mode's grid: refused here, on every rank before any collective,
  // rather than by the attention layer of whichever stage builds one first.
  if (layout.mode != TpMode::none) {
    const TpGrid grid(grid_kind(layout.mode), layout.tp, layout.depth);
    require_heads_split(spec.model, grid.axes().front().size, "--heads", tp_mode_name(layout.mode));
  }
  return plan;
}

}  // namespace mdtp
