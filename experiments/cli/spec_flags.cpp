#include "cli/spec_flags.hpp"

#include <fmt/format.h>

#include "io/atomic_file.hpp"
#include "spec/run_spec_json.hpp"

namespace mdtp::cli {
namespace {

std::string shown(double value) { return fmt::format("{}", value); }

// An mdtp parser's error as the option's own (CLI11 prints "--flag: message").
template <class Parse>
auto parsed(const std::string& name, Parse parse, const std::string& text) {
  try {
    return parse(text);
  } catch (const Error& e) {
    throw CLI::ValidationError(name, e.what());
  }
}

}  // namespace

template <class T, class Apply>
CLI::Option* SpecFlags::flag(const std::string& name, const std::string& help, Apply apply) {
  CLI::Option* option = app_.add_option_function<T>(
      name, [this, apply](const T& value) { edits_.push_back([apply, value](RunSpec& s) { apply(s, value); }); },
      help);
  using E = typename detail::element<T>::type;
  if constexpr (!std::is_same_v<T, E>) option->delimiter(',');
  if constexpr (std::is_arithmetic_v<E>) option->transform(number<E>());
  return option;
}

// A name mdtp parses itself (a mode, schedule, dtype, ...): parsed while the command line is parsed,
// so a bad one is refused then, as CLI11 refuses a bad number; the edit keeps the parsed value.
template <class Parse, class Apply>
CLI::Option* SpecFlags::named(const std::string& name, const std::string& help, Parse parse, Apply apply) {
  return app_.add_option_function<std::string>(
      name,
      [this, name, parse, apply](const std::string& text) {
        auto value = parsed(name, parse, text);
        edits_.push_back([apply, value](RunSpec& s) { apply(s, value); });
      },
      help);
}

SpecFlags::SpecFlags(CLI::App& app, unsigned groups, RunSpec defaults, std::string model_note)
    : app_(app), defaults_(std::move(defaults)) {
  if (groups & kModelFlags) add_model(model_note);
  if (groups & kBatchFlags) add_batch();
  if (groups & kTpFlags) add_tp();
  if (groups & kPipelineFlags) add_pipeline();
  if (groups & kZeroFlags) add_zero();
  if (groups & kRecomputeFlags)
    named("--recompute",
          "activation recomputation: none, selective (the attention core's probabilities again from the kept Q, K, V) "
          "or full (each block's forward again before its backward)",
          parse_recompute, [](RunSpec& s, Recompute v) { s.recompute = v; })
        ->default_str(recompute_name(defaults_.recompute))
        ->type_name("POLICY");
  if (groups & kPrecisionFlags) add_precision();
  if (groups & kOptimizerFlags) add_optimizer();
  if (groups & kConfigFlags)
    add(app_, "--config", config_path_, "a run spec (JSON, as --write-config writes it); flags given beside it override")
        ->type_name("FILE.json");
  if (groups & kWriteConfigFlag)
    add(app_, "--write-config", write_config_path_, "write the fully resolved run spec to this file (JSON)")
        ->type_name("FILE.json");
}

void SpecFlags::add_model(const std::string& model_note) {
  named("--model",
        "block family: gpt2 (LayerNorm, learned positions, GeLU MLP, biases, tied head unless --untie-embeddings) or "
        "llama (RMSNorm, rotary positions, SwiGLU MLP, grouped-query attention, no biases, untied head unless "
        "--tie-embeddings)",
        parse_model_family,
        [](RunSpec& s, ModelFamily v) {
          s.model.family = v;
          // --tie-embeddings / --untie-embeddings, applied last, override the family's own choice
          s.model.tied_head = v == ModelFamily::gpt2;
        })
      ->default_str(model_family_name(defaults_.model.family))
      ->type_name("FAMILY");
  auto size = [&](const char* name, std::int64_t ModelShape::*member, const std::string& what) {
    const std::int64_t value = defaults_.model.*member;
    flag<std::int64_t>(name, what, [member](RunSpec& s, std::int64_t v) { s.model.*member = v; })
        ->check(at_least(1))
        ->default_str(value > 0 ? std::to_string(value) : model_note);
  };
  size("--layers", &ModelShape::layers, "transformer layers l");
  size("--hidden", &ModelShape::hidden, "hidden size h (the embedding width)");
  size("--heads", &ModelShape::heads, "attention heads a");
  size("--seq", &ModelShape::seq, "sequence length s (tokens per sequence)");
  size("--vocab", &ModelShape::vocab, "vocabulary V");
  flag<std::int64_t>("--ffn-hidden", "MLP width (0: 4 x hidden)",
                     [](RunSpec& s, std::int64_t v) { s.model.ffn_hidden = v; })
      ->check(at_least(0))
      ->default_str(std::to_string(defaults_.model.ffn_hidden));
  flag<std::int64_t>("--kv-heads", "key/value heads, grouped-query attention (0: heads)",
                     [](RunSpec& s, std::int64_t v) { s.model.kv_heads = v; })
      ->check(at_least(0))
      ->default_str(std::to_string(defaults_.model.kv_heads));
  flag<double>("--rope-theta", "llama: the rotary base theta", [](RunSpec& s, double v) { s.model.rope_theta = v; })
      ->default_str(shown(defaults_.model.rope_theta));
  flag<double>("--norm-eps", "the LayerNorm / RMSNorm epsilon", [](RunSpec& s, double v) { s.model.norm_eps = v; })
      ->default_str(shown(defaults_.model.norm_eps));
  CLI::Option* tie =
      app_.add_flag("--tie-embeddings", tie_embeddings_, "tie the LM head to the token embedding (gpt2's default)");
  app_.add_flag("--untie-embeddings", untie_embeddings_,
                "an LM head of its own, not the token embedding's transpose (llama's default; Megatron-LM's "
                "--untie-embeddings-and-output-weights)")
      ->excludes(tie);
}

void SpecFlags::add_batch() {
  flag<std::int64_t>("--global-batch", "sequences per step B, over every replica and micro-batch",
                     [](RunSpec& s, std::int64_t v) { s.global_batch = v; })
      ->check(at_least(1))
      ->default_str(std::to_string(defaults_.global_batch));
  app_.add_option_function<std::int64_t>(
          "--micro-batch-size", [this](std::int64_t v) { micro_batch_size_ = v; },
          "sequences per micro-batch b (sets the micro-batches: m = B / (dp x b)); not with --micro-batches")
      ->transform(number<std::int64_t>())
      ->check(at_least(1));
}

void SpecFlags::add_tp() {
  named("--tp-mode", std::string("tensor-parallel mode (") + tp_mode_list() + ")", parse_tp_mode,
        [](RunSpec& s, TpMode v) { s.layout.mode = v; })
      ->default_str(tp_mode_name(defaults_.layout.mode))
      ->type_name("MODE");
  flag<int>("--tp", "tensor-parallel size", [](RunSpec& s, int v) { s.layout.tp = v; })
      ->check(at_least(1))
      ->default_str(std::to_string(defaults_.layout.tp));
  flag<int>("--tp-depth", "2.5d: depth d (tp = d x q x q)", [](RunSpec& s, int v) { s.layout.depth = v; })
      ->check(at_least(1))
      ->default_str(std::to_string(defaults_.layout.depth));
  flag<int>("--dp", "data-parallel size (default: the rest of the world, world / (tp x pp))",
            [](RunSpec& s, int v) { s.layout.dp = v; })
      ->check(at_least(1));
}

void SpecFlags::add_pipeline() {
  const ParallelLayout& d = defaults_.layout;
  flag<int>("--pp", "pipeline stages", [](RunSpec& s, int v) { s.layout.pp = v; })
      ->check(at_least(1))
      ->default_str(std::to_string(d.pp));
  // The schedule brings its stage mapping and (but for interleaved) its chunks per stage; --chunks,
  // registered after it, applies after it.
  named("--schedule", std::string("pipeline schedule: ") + schedule_list(), parse_schedule,
        [](RunSpec& s, ScheduleKind v) {
          s.layout.schedule = v;
          s.layout.stage_mapping = stage_mapping_of(v);
          if (fixed_chunks(v) > 0) s.layout.chunks = fixed_chunks(v);
        })
      ->default_str(schedule_name(d.schedule))
      ->type_name("SCHEDULE");
  flag<int>("--micro-batches", "micro-batches m per step and replica",
            [](RunSpec& s, int v) { s.layout.micro_batches = v; })
      ->check(at_least(1))
      ->default_str(std::to_string(d.micro_batches));
  flag<int>("--chunks", "model chunks per stage v (interleaved; zb-v and dualpipev run 2)", [](RunSpec& s, int v) { s.layout.chunks = v; })
      ->check(at_least(1))
      ->default_str(std::to_string(d.chunks));
  flag<int>("--group-size", "interleaved: micro-batch group size N (0: pp)",
            [](RunSpec& s, int v) { s.layout.group_size = v; })
      ->check(at_least(0))
      ->default_str(std::to_string(d.group_size));
  flag<std::vector<int>>("--pp-layers", "blocks per virtual stage, pp x chunks counts (default: an even split)",
                         [](RunSpec& s, const std::vector<int>& v) { s.layout.pp_layers = v; })
      ->type_name("N,N,...");
}

void SpecFlags::add_zero() {
  const ZeroOptions& d = defaults_.zero;
  flag<int>("--zero", "ZeRO stage over dp: 0 none, 1 optimizer state, 2 + gradients, 3 + parameters",
            [](RunSpec& s, int v) { s.zero.stage = v; })
      ->check(between(0, 3))
      ->default_str(std::to_string(d.stage));
  flag<double>("--zero-bucket-mb", "ZeRO bucket size cap, MiB", [](RunSpec& s, double v) { s.zero.bucket_mb = v; })
      ->default_str(shown(d.bucket_mb));
  auto on = [this](const char* name, const std::string& help, bool ZeroOptions::*member) {
    app_.add_flag_function(name, [this, member](std::int64_t) { edits_.push_back([member](RunSpec& s) { s.zero.*member = true; }); },
                           help);
  };
  on("--zero-offload", "ZeRO 1-3: master weights, moments and the update in host memory", &ZeroOptions::offload);
  on("--zero-keep-params", "ZeRO 3: gather each unit's parameters once per step, not once per pass",
     &ZeroOptions::keep_parameters);
  on("--zero-reduce-per-micro-batch",
     "ZeRO 2-3: reduce-scatter the gradients after every micro-batch (m x the traffic, full buckets freed per "
     "micro-batch), not once per step",
     &ZeroOptions::reduce_per_micro_batch);
}

void SpecFlags::add_precision() {
  // --dtype sets the gradient reduction as Megatron does (fp32 under a 16-bit dtype) unless
  // --grad-reduce-dtype, registered after it so that its edit applies last, says otherwise.
  named("--dtype", "parameter and activation dtype: f32, f64, bf16, f16", parse_dtype,
        [](RunSpec& s, DType v) {
          s.precision.params = v;
          s.precision.grad_reduce = precision_for(v).grad_reduce;
        })
      ->default_str(dtype_name(defaults_.precision.params))
      ->type_name("DTYPE");
  named("--grad-reduce-dtype", "dtype of the gradients and of every gradient sum (default: f32 under bf16 and f16, else --dtype)", parse_dtype,
        [](RunSpec& s, DType v) { s.precision.grad_reduce = v; })
      ->type_name("DTYPE");
  const LossScaling& l = defaults_.precision.loss_scaling;
  flag<double>("--loss-scale", "f16: a fixed loss scale (1: unscaled) instead of the dynamic one",
               [](RunSpec& s, double v) { s.precision.loss_scaling.fixed = v; })
      ->type_name("S");
  flag<double>("--initial-loss-scale", "f16, dynamic loss scale: where it starts",
               [](RunSpec& s, double v) { s.precision.loss_scaling.initial = v; })
      ->default_str(shown(l.initial));
  flag<double>("--min-loss-scale", "f16, dynamic loss scale: its floor",
               [](RunSpec& s, double v) { s.precision.loss_scaling.min = v; })
      ->default_str(shown(l.min));
  flag<std::int64_t>("--loss-scale-window", "f16, dynamic loss scale: clean steps before it doubles",
                     [](RunSpec& s, std::int64_t v) { s.precision.loss_scaling.window = v; })
      ->default_str(std::to_string(l.window));
  flag<int>("--hysteresis", "f16, dynamic loss scale: overflows counted before it halves",
            [](RunSpec& s, int v) { s.precision.loss_scaling.hysteresis = v; })
      ->default_str(std::to_string(l.hysteresis));
  flag<double>("--dropout", "dropout probability (mdtp's engine runs without; the cost model counts the masks)",
               [](RunSpec& s, double v) { s.dropout = v; })
      ->default_str(shown(defaults_.dropout));
}

void SpecFlags::add_optimizer() {
  const OptimizerSpec& d = defaults_.optimizer;
  named("--optimizer", "sgd or adamw (AdamW: beta 0.9, 0.95, eps 1e-8, weight decay 0.1)", parse_optimizer_kind,
        [](RunSpec& s, OptimizerKind v) { s.optimizer.kind = v; })
      ->check(one_of({"sgd", "adamw"}))
      ->default_str(optimizer_kind_name(d.kind));
  flag<double>("--lr", "learning rate", [](RunSpec& s, double v) { s.optimizer.lr = v; })->default_str(shown(d.lr));
  flag<double>("--grad-clip", "clip the global gradient norm to this (0: no clipping)",
               [](RunSpec& s, double v) { s.optimizer.grad_clip = v; })
      ->default_str(shown(d.grad_clip));
  flag<std::uint64_t>("--seed", "seed of the initial parameters and the data order",
                      [](RunSpec& s, std::uint64_t v) { s.seed = v; })
      ->default_str(std::to_string(defaults_.seed));
}

RunSpec SpecFlags::resolve() const {
  RunSpec spec = config_path_.empty() ? defaults_ : read_run_spec_file(config_path_, defaults_);
  for (const auto& edit : edits_) edit(spec);
  if (tie_embeddings_) spec.model.tied_head = true;
  if (untie_embeddings_) spec.model.tied_head = false;
  require(!micro_batch_size_ || app_.count("--micro-batches") == 0,
          "give --micro-batches or --micro-batch-size, not both");
  return spec;
}

bool SpecFlags::given(const std::string& flag) const { return app_.count(flag) > 0; }

void SpecFlags::write_config(const RunSpec& spec) const {
  if (!write_config_path_.empty()) write_text_atomically(write_config_path_, run_spec_text(spec));
}

const std::vector<std::pair<std::string, std::string>>& renamed_run_flags() {
  static const std::vector<std::pair<std::string, std::string>> renamed{
      {"--embd", "--hidden"},           {"--batch", "--global-batch"},
      {"--microbatches", "--micro-batches"}, {"--micro-batch", "--micro-batch-size"},
      {"--zero-stage", "--zero"},       {"--no-dropout", "--dropout 0"},
      {"--mode", "--tp-mode"}};
  return renamed;
}

void add_renamed_flags(CLI::App& app, const std::vector<std::pair<std::string, std::string>>& old_to_new) {
  for (const auto& [old_name, new_name] : old_to_new) {
    if (app.get_option_no_throw(old_name) != nullptr) continue;  // the command still has it, meaning something else
    app.add_option_function<std::vector<std::string>>(
           old_name,
           [old_name, new_name](const std::vector<std::string>&) {
             throw CLI::ValidationError(old_name, "was renamed; use " + new_name + " (mdtp's one set of run flags)");
           },
           "")
        ->expected(0, 1)
        ->group("");  // hidden from --help
  }
}

int micro_batches_for(std::int64_t global_batch, int dp, std::int64_t micro_batch_size) {
  require(dp >= 1 && micro_batch_size >= 1 && global_batch % (std::int64_t{dp} * micro_batch_size) == 0,
          "--micro-batch-size ", micro_batch_size, " must divide the global batch ", global_batch, " over dp ", dp,
          " (m = B / (dp x b) micro-batches)");
  return static_cast<int>(global_batch / (std::int64_t{dp} * micro_batch_size));
}

}  // namespace mdtp::cli
