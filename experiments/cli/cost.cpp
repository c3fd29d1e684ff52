// `mdtp cost`: the theoretical model of one configuration, computed without MPI — the exact
// collective list with α-β times, GEMM time, memory per rank and the published asymptotic row
// (src/cost/report.hpp); or the ZeRO table (--zero), or the pipeline bubble (--pipeline); or, given
// --heads, the whole training step of a GPT on a cluster (src/cost/step_model.hpp, as `mdtp plan`
// evaluates one configuration), with --zero per ZeRO stage.
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <optional>

#include "calibrate/calibration_io.hpp"
#include "cli/commands.hpp"
#include "cli/step_options.hpp"
#include "cost/report.hpp"
#include "cost/step_model.hpp"
#include "cost/step_report.hpp"
#include "cost/cluster.hpp"

namespace mdtp::cli {
namespace {

struct CostOptions {
  // The model of a layer.
  TpMode mode = TpMode::none;
  int tp = 1, pp = 1, tp_depth = 1, ranks_per_node = 0, layers = 1;
  std::optional<int> world;                     // default tp * pp
  std::string layer = "mlp";
  std::int64_t batch = 0, seq = 0, hidden = 0;  // required
  std::optional<std::int64_t> ffn;              // default 4 * hidden
  DType dtype = DType::f32;
  bool keep_gathered_3d = false, dp_grad_sync = false, mpich_allreduce = false;
  std::optional<double> alpha_intra, beta_intra, alpha_inter, beta_inter, gemm_flops;
  std::string calibration, calibration_run;
  std::optional<double> optimizer_bytes;  // default 0 for a layer, 12 for --zero
  // --zero
  bool zero = false;
  cost::ZeroConfig zero_config;
  // --pipeline
  bool pipeline = false;
  int microbatches = 1, chunks = 1;
  bool json = false;
  // A whole GPT step (given --heads); --layers, --hidden, --seq, --tp, --tp-depth, --pp, --chunks
  // and --dtype are shared with the layer form.
  std::int64_t heads = 0, vocab = 0, global_batch = 0, micro_batch = 1;
  TpMode tp_mode = TpMode::d1;
  int gpus = 0;
  std::string schedule = "1f1b", recompute = "none", cluster = "dgx-a100";
  int zero_stage = 0;
  bool zero_reduce_per_micro_batch = false, zero_keep_parameters = false;
  bool no_dropout = false;
  bool streaming_attention = false;
};

// Options a form needs, refused by name when missing.
void require_given(const CLI::App& app, const std::string& form, std::initializer_list<const char*> options) {
  for (const char* option : options)
    require(app.count(option) > 0, form, " needs ", option, " (mdtp cost --help)");
}

int run_zero(const CostOptions& o, const CLI::App& app) {
  require_given(app, "--zero", {"--params", "--dp"});
  cost::ZeroConfig c = o.zero_config;
  c.optimizer_bytes = o.optimizer_bytes.value_or(c.optimizer_bytes);
  const auto stages = cost::zero_costs(c);
  std::cout << (o.json ? cost::zero_json(c, stages) : cost::zero_text(c, stages));
  return 0;
}

int run_pipeline(const CostOptions& o, const CLI::App& app) {
  require_given(app, "--pipeline", {"--pp", "--microbatches"});
  std::vector<cost::PipelineConfig> schedules;
  for (auto schedule : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b})
    schedules.push_back({o.pp, o.microbatches, 1, schedule});
  if (o.chunks > 1 || app.count("--chunks") > 0)
    schedules.push_back({o.pp, o.microbatches, o.chunks, ScheduleKind::interleaved});
  std::cout << (o.json ? cost::pipeline_json(schedules) : cost::pipeline_text(schedules));
  return 0;
}

cost::Workload layer_workload(const CostOptions& o) {
  cost::Workload w;
  w.mode = o.mode;
  w.mesh.tp = o.tp;
  w.mesh.pp = o.pp;
  w.mesh.tp_mode = o.mode;
  w.mesh.tp_depth = o.tp_depth;
  w.mesh.world = o.world.value_or(o.tp * o.pp);
  w.mesh.ranks_per_node = o.ranks_per_node;
  w.layer = o.layer;
  w.rows = o.batch * o.seq;
  w.hidden = o.hidden;
  w.ffn_hidden = o.ffn.value_or(4 * o.hidden);
  w.dtype = o.dtype;
  w.options.keep_gathered_3d = o.keep_gathered_3d;
  if (o.dp_grad_sync) w.data_parallel_group = "dp";
  return w;
}

// The link parameters: defaults, a calibration file, or given α and β; `source` says which.
cost::TimeModel time_model(const CostOptions& o, DType dtype, std::string& source) {
  cost::TimeModel model;
  source = "defaults";
  const bool given_links = o.alpha_intra || o.beta_intra || o.alpha_inter || o.beta_inter;
  if (!o.calibration.empty()) {
    require(!given_links, "give either --calibration or the --alpha-*/--beta-* link parameters, not both");
    const std::string spec = o.calibration + (o.calibration_run.empty() ? "" : ":/runs/" + o.calibration_run);
    model.calibration = calibrate::load_calibration(spec).model.calibration;
    source = "calibration " + o.calibration;
  }
  if (given_links) {
    auto& intra = model.links[LinkClass::intra_node];
    auto& inter = model.links[LinkClass::inter_node];
    intra.alpha = o.alpha_intra.value_or(intra.alpha);
    intra.beta = o.beta_intra.value_or(intra.beta);
    inter.alpha = o.alpha_inter.value_or(inter.alpha);
    inter.beta = o.beta_inter.value_or(inter.beta);
    source = "given";
  }
  if (o.gemm_flops) model.gemm_flops[dtype] = *o.gemm_flops;
  model.algorithms.ring_all_reduce = !o.mpich_allreduce;
  return model;
}

int run_layer(const CostOptions& o, const CLI::App& app) {
  require_given(app, "the model of a layer", {"--mode", "--batch", "--seq", "--hidden"});
  const cost::Workload w = layer_workload(o);
  std::string source;
  const cost::TimeModel model = time_model(o, w.dtype, source);
  const cost::CostReport report = cost::build_cost_report(w, model, o.layers, o.optimizer_bytes.value_or(0.0), source);
  std::cout << (o.json ? cost::report_json(report) : cost::report_text(report));
  return 0;
}

cost::StepConfig model_step_config(const CostOptions& o) {
  return step_config(StepChoice{cost::GptShape{o.layers, o.hidden, o.heads, o.seq, o.vocab}, o.global_batch,
                                o.micro_batch, o.tp_mode, o.tp, o.tp_depth, o.pp, o.gpus, o.chunks, o.zero_stage,
                                o.schedule, o.recompute, o.dtype, !o.no_dropout, cost::OverlapAssumptions{},
                                !o.streaming_attention, o.zero_reduce_per_micro_batch, o.zero_keep_parameters});
}

// The whole step of one configuration; with --zero, a row per ZeRO stage (memory and the exposed
// data-parallel time; TP and PP sharding applied first).
int run_model(const CostOptions& o, const CLI::App& app) {
  require_given(app, "the model of a GPT step", {"--layers", "--hidden", "--heads", "--seq", "--vocab", "--global-batch",
                                                 "--gpus", "--tp-mode"});
  const cost::Cluster cluster = cost::load_cluster(cost::find_cluster(o.cluster));
  if (!o.zero) {
    const cost::StepEstimate e = cost::estimate_step(model_step_config(o), cluster);
    std::cout << (o.json ? cost::estimate_json(e, cluster) : cost::estimate_text(e, cluster));
    return 0;
  }
  CostOptions per_stage = o;
  std::vector<cost::StepEstimate> rows;
  for (int stage = 0; stage <= 3; ++stage) {
    per_stage.zero_stage = stage;
    per_stage.zero_reduce_per_micro_batch = o.zero_reduce_per_micro_batch && stage >= 2;  // stages 2–3 only
    per_stage.zero_keep_parameters = o.zero_keep_parameters && stage == 3;
    rows.push_back(cost::estimate_step(model_step_config(per_stage), cluster));
  }
  if (o.json) {
    std::cout << "[";
    for (std::size_t i = 0; i < rows.size(); ++i) std::cout << (i ? ",\n" : "") << cost::estimate_json(rows[i], cluster);
    std::cout << "]\n";
    return 0;
  }
  constexpr double GiB = 1024.0 * 1024.0 * 1024.0;
  std::cout << "ZeRO stages of " << cost::describe(rows.front().config) << " on " << o.cluster
            << " (memory per GPU of the largest stage, GiB"
            << (o.zero_reduce_per_micro_batch ? "; 2m, 3m: gradients reduce-scattered after every micro-batch" : "")
            << (o.zero_keep_parameters ? "; 3k: parameters gathered once per step and kept" : "")
            << ")\n"
            << "stage  parameters  gradients  optimizer  activations     total  fits  dp comm s    step s\n";
  for (const cost::StepEstimate& e : rows) {
    const cost::MemorySplit& m = e.memory;
    fmt::print("{:>5}  {:10.2f}  {:9.2f}  {:9.2f}  {:11.2f}  {:8.2f}  {:>4}  {:9.4f}  {:8.4f}\n",
               cost::zero_label(e.config), m.parameters / GiB, m.gradients / GiB, m.optimizer / GiB,
               m.activations / GiB, m.total() / GiB, e.fits ? "yes" : "no", e.time.dp_comm, e.step_seconds);
  }
  return 0;
}

void add_layer_options(CLI::App& app, CostOptions& o) {
  add_tp_mode(app, "--mode", o.mode, "tensor-parallel mode")->default_str("");
  add(app, "--tp", o.tp, "tensor-parallel size");
  add(app, "--world", o.world, "world size (default tp*pp; dp = world/(tp*pp))");
  add(app, "--tp-depth", o.tp_depth, "2.5d depth d");
  add(app, "--pp", o.pp, "pipeline stages (also of --pipeline)");
  add(app, "--layer", o.layer, "the layer modelled")->check(one_of({"linear", "layernorm", "mlp"}));
  add(app, "--batch", o.batch, "batch B (rows = B*S)")->default_str("");
  add(app, "--seq", o.seq, "sequence length S")->default_str("");
  add(app, "--hidden", o.hidden, "hidden size H")->default_str("");
  add(app, "--ffn", o.ffn, "MLP inner / Linear output size (default 4*hidden)");
  add(app, "--layers", o.layers, "identical layers L (the plan, memory and compute x L)");
  add_dtype(app, "--dtype", o.dtype, "element type");
  app.add_flag("--keep-gathered-3d", o.keep_gathered_3d, "3d: keep the gathered X and W for backward");
  add(app, "--ranks-per-node", o.ranks_per_node, "ranks per node: intra- or inter-node links per group (0: one node)");
  app.add_flag("--dp-grad-sync", o.dp_grad_sync, "add the dp all-reduce of every gradient");
  add(app, "--alpha-intra", o.alpha_intra, "intra-node latency alpha, s");
  add(app, "--beta-intra", o.beta_intra, "intra-node time per byte beta, s/B");
  add(app, "--alpha-inter", o.alpha_inter, "inter-node latency alpha, s");
  add(app, "--beta-inter", o.beta_inter, "inter-node time per byte beta, s/B");
  add(app, "--calibration", o.calibration, "fitted link parameters from `mdtp calibrate`")->type_name("FILE.h5");
  add(app, "--calibration-run", o.calibration_run, "which calibrate run of the file (NNNN-calibrate; default latest)");
  add(app, "--gemm-flops", o.gemm_flops, "GEMM rate per rank, flop/s");
  app.add_flag("--mpich-allreduce", o.mpich_allreduce,
               "model MPICH's Rabenseifner instead of the ring for large all-reduce");
  add(app, "--optimizer-bytes", o.optimizer_bytes, "optimizer bytes per parameter K (default 0; 12 with --zero)");
}

void add_model_options(CLI::App& app, CostOptions& o) {
  add(app, "--heads", o.heads, "GPT step: attention heads (selects the whole-step form)")->default_str("");
  add(app, "--vocab", o.vocab, "GPT step: vocabulary V")->default_str("");
  add(app, "--global-batch", o.global_batch, "GPT step: sequences per step")->default_str("");
  add(app, "--micro-batch", o.micro_batch, "GPT step: sequences per micro-batch");
  add_tp_mode(app, "--tp-mode", o.tp_mode, "GPT step: tensor-parallel mode");
  add(app, "--gpus", o.gpus, "GPT step: GPUs in the job (dp = gpus / (tp * pp))")->default_str("");
  add(app, "--schedule", o.schedule, "GPT step: pipeline schedule")
      ->check(one_of({"gpipe", "1f1b", "interleaved", "zb-h1"}));
  add(app, "--recompute", o.recompute, "GPT step: activation recomputation")
      ->check(one_of({"none", "selective", "full"}));
  add(app, "--cluster", o.cluster, "GPT step: a name in data/clusters/ or a path to a cluster JSON");
  add(app, "--zero-stage", o.zero_stage, "GPT step: ZeRO stage 0-3 (--zero prints all four)")->check(between(0, 3));
  app.add_flag("--zero-reduce-per-micro-batch", o.zero_reduce_per_micro_batch,
               "GPT step: ZeRO 2-3 reduce the gradients after every micro-batch (with --zero: rows 2-3)");
  app.add_flag("--zero-keep-params", o.zero_keep_parameters,
               "GPT step: ZeRO 3 gathers each unit's parameters once per step and keeps them (with --zero: row 3)");
  app.add_flag("--no-dropout", o.no_dropout, "GPT step: no dropout masks (mdtp's GPT)");
  app.add_flag("--streaming-attention", o.streaming_attention,
               "GPT step: the attention kernel keeps no T×T probabilities (selective = none)");
}

}  // namespace

Command add_cost(CLI::App& root) {
  auto o = std::make_shared<CostOptions>();
  CLI::App* app =
      add_command(root, "cost", "print the cost model of a configuration: collectives, times, memory (no MPI)");
  app->footer(
      "The model of one layer (x L) per rank, without MPI: every collective (phase, group, op) with bytes, bus bytes\n"
      "and alpha-beta seconds, GEMM time, memory, and the published asymptotic row (not normalised consistently).\n"
      "  mdtp cost --mode 2d --tp 4 --world 8 --batch 8 --seq 512 --hidden 1024\n"
      "  mdtp cost --zero --params PSI --dp N [--param-bytes 2 --grad-bytes 2 --optimizer-bytes 12]\n"
      "  mdtp cost --pipeline --pp P --microbatches M [--chunks V]\n"
      "  mdtp cost --layers 128 --hidden 25600 --heads 160 --seq 2048 --vocab 51200 --global-batch 3072 --micro-batch 1\n"
      "            --tp-mode 1d --tp 8 --pp 64 --gpus 3072 --schedule interleaved --chunks 2 --recompute full\n"
      "            --dtype bf16 --cluster dgx-a100 [--zero] [--json]     (the whole GPT step, as mdtp plan)");
  add_layer_options(*app, *o);
  add_model_options(*app, *o);
  CLI::Option* zero =
      app->add_flag("--zero", o->zero, "print the ZeRO stages 0-3 instead (--params, --dp; or a GPT step's, with --heads)");
  add(*app, "--params", o->zero_config.parameters, "--zero: parameters Psi")->default_str("");
  add(*app, "--dp", o->zero_config.data_parallel, "--zero: data-parallel ranks N_d")->default_str("");
  add(*app, "--param-bytes", o->zero_config.param_bytes, "--zero: bytes per parameter");
  add(*app, "--grad-bytes", o->zero_config.grad_bytes, "--zero: bytes per gradient");
  CLI::Option* pipeline =
      app->add_flag("--pipeline", o->pipeline, "print the pipeline bubble instead (--pp, --microbatches)");
  add(*app, "--microbatches", o->microbatches, "--pipeline: micro-batches m")->default_str("");
  add(*app, "--chunks", o->chunks, "--pipeline: model chunks per stage v (adds interleaved 1F1B)");
  zero->excludes(pipeline);
  app->add_flag("--json", o->json, "print JSON instead of text");
  return {app, false, [o, app](const std::string&) {
            if (app->count("--heads") > 0) return run_model(*o, *app);
            if (o->zero) return run_zero(*o, *app);
            if (o->pipeline) return run_pipeline(*o, *app);
            return run_layer(*o, *app);
          }};
}

}  // namespace mdtp::cli
