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
#include "cli/preset_option.hpp"
#include "cli/spec_flags.hpp"
#include "cli/step_options.hpp"
#include "cost/gpt_step_comm.hpp"
#include "cost/step_bytes_report.hpp"
#include "io/output_path.hpp"
#include "spec/names.hpp"
#include "cost/report.hpp"
#include "cost/step_model.hpp"
#include "cost/step_report.hpp"
#include "cost/cluster.hpp"

namespace mdtp::cli {
namespace {

// What `mdtp cost` takes beyond the run spec (cli/spec_flags.hpp) and the step assumptions.
struct CostOptions {
  // The model of a layer.
  int ranks_per_node = 0;
  std::string layer = "mlp";
  bool keep_gathered_3d = false, dp_grad_sync = false, mpich_allreduce = false;
  std::optional<double> alpha_intra, beta_intra, alpha_inter, beta_inter, gemm_flops;
  std::string calibration, calibration_run;
  std::optional<double> optimizer_bytes;  // default 0 for a layer, 12 for --zero-table
  // --zero-table: the ZeRO paper's per-stage table (its N_d is --dp).
  bool zero_table = false;
  cost::ZeroPaperInputs zero_config;
  // --pipeline: the bubble of --pp stages over --micro-batches (and --chunks).
  bool pipeline = false;
  bool json = false;
  // The whole GPT step (given --heads or --config).
  StepAssumptions step;
  bool step_bytes = false;
  PresetOption preset;  // --preset: a published model under the flags
  std::unique_ptr<SpecFlags> spec;
};

// Options a form needs, refused by name when missing.
void require_given(const CLI::App& app, const std::string& form, std::initializer_list<const char*> options) {
  for (const char* option : options)
    require(app.count(option) > 0, form, " needs ", option, " (mdtp cost --help)");
}

// Another form's options, refused by name when given: a form never silently drops a flag.
void refuse_given(const CLI::App& app, const std::string& form, const std::vector<std::string>& options,
                  const std::string& owner) {
  for (const std::string& option : options)
    require(app.count(option) == 0, option, " does not apply to ", form, "; it is ", owner, " (mdtp cost --help)");
}

// The options of the layer form, and of the GPT step, that no other form reads.
std::vector<std::string> layer_form_options() {
  return {"--layer",       "--keep-gathered-3d", "--ranks-per-node", "--dp-grad-sync",
          "--alpha-intra", "--beta-intra",       "--alpha-inter",    "--beta-inter",
          "--calibration", "--calibration-run",  "--gemm-flops",     "--mpich-allreduce"};
}
constexpr const char* kLayerFormOwner =
    "the layer form's (no --heads); a GPT step takes its links and rates from --cluster (a cluster file: "
    "mdtp calibrate --cluster-out writes one)";
// The GPT step's: its step assumptions (as registered) and --step-bytes.
std::vector<std::string> step_options(const CostOptions& o) {
  std::vector<std::string> options = o.step.step_only_options;
  options.push_back("--step-bytes");
  return options;
}
constexpr const char* kStepOwner = "the GPT step's (give --heads, --config or --preset)";

int run_zero(const CostOptions& o, const CLI::App& app) {
  require_given(app, "--zero-table", {"--params", "--dp"});
  refuse_given(app, "the ZeRO paper's table", layer_form_options(), kLayerFormOwner);
  refuse_given(app, "the ZeRO paper's table", step_options(o), kStepOwner);
  cost::ZeroPaperInputs c = o.zero_config;
  c.data_parallel = o.spec->resolve().layout.dp;
  c.optimizer_bytes = o.optimizer_bytes.value_or(c.optimizer_bytes);
  const auto stages = cost::zero_costs(c);
  std::cout << (o.json ? cost::zero_json(c, stages) : cost::zero_text(c, stages));
  return 0;
}

int run_pipeline(const CostOptions& o, const CLI::App& app) {
  require_given(app, "--pipeline", {"--pp", "--micro-batches"});
  refuse_given(app, "--pipeline", layer_form_options(), kLayerFormOwner);
  refuse_given(app, "--pipeline", step_options(o), kStepOwner);
  refuse_given(app, "--pipeline", {"--optimizer-bytes"}, "the layer form's and the ZeRO paper table's");
  refuse_given(app, "--pipeline", {"--params", "--param-bytes", "--grad-bytes"}, "the ZeRO paper table's");
  const ParallelLayout l = o.spec->resolve().layout;
  std::vector<cost::PipelineConfig> schedules;
  for (auto schedule : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b})
    schedules.push_back({l.pp, l.micro_batches, 1, schedule});
  if (l.chunks > 1 || app.count("--chunks") > 0)
    schedules.push_back({l.pp, l.micro_batches, l.chunks, ScheduleKind::interleaved});
  std::cout << (o.json ? cost::pipeline_json(schedules) : cost::pipeline_text(schedules));
  return 0;
}

cost::Workload layer_workload(const CostOptions& o, const RunSpec& spec, std::int64_t micro_batch_size) {
  const ParallelLayout& l = spec.layout;
  cost::Workload w;
  w.mode = l.mode;
  w.mesh.tp = l.tp;
  w.mesh.pp = l.pp;
  w.mesh.tp_mode = l.mode;
  w.mesh.tp_depth = l.depth;
  w.mesh.world = l.world();
  w.mesh.ranks_per_node = o.ranks_per_node;
  w.layer = o.layer;
  w.rows = micro_batch_size * spec.model.seq;
  w.hidden = spec.model.hidden;
  w.ffn_hidden = spec.model.ffn();
  w.block = cost::block_widths(spec.model);  // --model llama: its QKV and MLP widths, no biases, RMSNorm
  w.dtype = spec.precision.params;
  w.options.keep_gathered_3d = o.keep_gathered_3d;
  if (o.dp_grad_sync) w.data_parallel_group = group::dp;
  return w;
}

// The link parameters: defaults, a calibration file, or given α and β; `source` says which.
cost::TimeModel time_model(const CostOptions& o, const CLI::App& app, DType dtype, std::string& source) {
  cost::TimeModel model;
  source = "defaults";
  // --cluster: its links and GEMM rates (bf16 and f16 included), as the GPT-step form uses them.
  if (app.count("--cluster") > 0) {
    model = cost::cluster_time_model(o.step.cluster_at(o.step.cluster));
    source = "cluster " + o.step.cluster;
  }
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
  require_given(app, "the model of a layer", {"--tp-mode", "--micro-batch-size", "--seq", "--hidden"});
  refuse_given(app, "the model of a layer", step_options(o), kStepOwner);
  refuse_given(app, "the model of a layer", {"--params", "--param-bytes", "--grad-bytes"}, "the ZeRO paper table's");
  const RunSpec spec = o.spec->resolve();
  const cost::Workload w = layer_workload(o, spec, *o.spec->micro_batch_size());
  std::string source;
  const cost::TimeModel model = time_model(o, app, w.dtype, source);
  require(model.calibration.gemm_flops.count(w.dtype) > 0 || model.gemm_flops.count(w.dtype) > 0, "the ",
          source, " time model has no GEMM rate for dtype ", dtype_name(w.dtype),
          "; give --cluster NAME (its data sheet's rates), --gemm-flops or a --calibration that measured it");
  // One layer unless --layers (or a --config) says how many identical ones.
  const int layers = o.spec->given("--layers") || o.spec->config_given() ? static_cast<int>(spec.model.layers) : 1;
  const cost::CostReport report = cost::build_cost_report(w, model, layers, o.optimizer_bytes.value_or(0.0), source);
  std::cout << (o.json ? cost::report_json(report) : cost::report_text(report));
  return 0;
}

// The exact bytes of one whole step per (phase, group, op): the busiest stage's, and every stage's
// total — the plan the trainer holds its ledger against (cost/gpt_step_comm.hpp).
int run_step_bytes(const RunSpec& spec, bool json) {
  const cost::StepCommConfig config{.spec = spec};
  std::vector<cost::StepCommPlan> stages;
  for (int stage = 0; stage < spec.layout.pp; ++stage) stages.push_back(cost::plan_step_comm(config, stage));
  std::cout << (json ? cost::step_bytes_json(spec, stages) : cost::step_bytes_text(spec, stages));
  return 0;
}

// The whole step of one configuration; with --zero-table, a row per ZeRO stage (memory and the
// exposed data-parallel time; TP and PP sharding applied first).
int run_model(const CostOptions& o, const CLI::App& app) {
  if (!o.spec->config_given() && !o.preset.given())
    require_given(app, "the model of a GPT step", {"--layers", "--hidden", "--heads", "--seq", "--vocab", "--global-batch"});
  refuse_given(app, "a GPT step", layer_form_options(), kLayerFormOwner);
  refuse_given(app, "a GPT step", {"--optimizer-bytes"},
               "the layer form's and the ZeRO paper table's; a GPT step counts its optimizer state from --dtype and "
               "--optimizer");
  refuse_given(app, "a GPT step", {"--params", "--param-bytes", "--grad-bytes"},
               "the ZeRO paper table's (--zero-table without --heads); a GPT step counts its parameters from the model");
  refuse_given(app, "a GPT step", {"--pipeline"}, "the bubble table's (no --heads)");
  RunSpec spec = o.preset.resolve(*o.spec);
  resolve_world(spec, o.step, *o.spec);
  validate(spec);
  if (!o.spec->write_config_path().empty()) {
    check_text_output(o.spec->write_config_path(), "--write-config");
    o.spec->write_config(spec);
  }
  if (!o.json) std::cout << o.preset.line(spec);
  if (o.step_bytes) return run_step_bytes(spec, o.json);
  const cost::Cluster cluster = o.step.cluster_at(o.step.cluster);
  if (!o.zero_table) {
    const cost::StepConfig step = o.step.step(spec);
    const cost::StepEstimate e = cost::estimate_step(step, cluster);
    const cost::StepEstimate bound = cost::estimate_step(step, cost::at_data_sheet(cluster));
    std::cout << (o.json ? cost::estimate_json(e, cluster, &bound) : cost::estimate_text(e, cluster, &bound));
    return 0;
  }
  std::vector<cost::StepEstimate> rows;
  for (int stage = 0; stage <= 3; ++stage) {
    RunSpec per_stage = spec;
    per_stage.zero.stage = stage;
    per_stage.zero.reduce_per_micro_batch = spec.zero.reduce_per_micro_batch && stage >= 2;  // stages 2–3 only
    per_stage.zero.keep_parameters = spec.zero.keep_parameters && stage == 3;
    per_stage.zero.offload = spec.zero.offload && stage >= 1;
    rows.push_back(cost::estimate_step(o.step.step(per_stage), cluster));
  }
  if (o.json) {
    std::cout << "[";
    for (std::size_t i = 0; i < rows.size(); ++i) std::cout << (i ? ",\n" : "") << cost::estimate_json(rows[i], cluster);
    std::cout << "]\n";
    return 0;
  }
  constexpr double GiB = 1024.0 * 1024.0 * 1024.0;
  std::cout << "ZeRO stages of " << cost::describe(rows.front().config) << " on " << o.step.cluster
            << " (memory per GPU of the largest stage, GiB"
            << (spec.zero.reduce_per_micro_batch ? "; 2m, 3m: gradients reduce-scattered after every micro-batch" : "")
            << (spec.zero.keep_parameters ? "; 3k: parameters gathered once per step and kept" : "")
            << (spec.zero.offload ? "; 1o-3o: optimizer state and update on the host (ZeRO-Offload)" : "")
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
  add(app, "--layer", o.layer, "the layer modelled (the layer form)")->check(one_of({"linear", "layernorm", "mlp"}));
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
  add(app, "--optimizer-bytes", o.optimizer_bytes, "optimizer bytes per parameter K (default 0; 12 with --zero-table)");
}

}  // namespace

Command add_cost(CLI::App& root) {
  auto o = std::make_shared<CostOptions>();
  CLI::App* app =
      add_command(root, "cost", "print the cost model of a configuration: collectives, times, memory (no MPI)");
  app->footer(
      "The model of one layer (x L) per rank, without MPI: every collective (phase, group, op) with bytes, bus bytes\n"
      "and alpha-beta seconds, GEMM time, memory, and the published asymptotic row (not normalised consistently).\n"
      "  mdtp cost --tp-mode 2d --tp 4 --dp 2 --micro-batch-size 8 --seq 512 --hidden 1024\n"
      "  mdtp cost --zero-table --params PSI --dp N [--param-bytes 2 --grad-bytes 2 --optimizer-bytes 12]\n"
      "  mdtp cost --pipeline --pp P --micro-batches M [--chunks V]\n"
      "  mdtp cost --layers 128 --hidden 25600 --heads 160 --seq 2048 --vocab 51200 --global-batch 3072\n"
      "            --micro-batch-size 1 --tp 8 --pp 64 --gpus 3072 --schedule interleaved --chunks 2\n"
      "            --recompute full --dtype bf16 --dropout 0.1 --cluster dgx-a100 [--zero-table] [--json]\n"
      "            (the whole GPT step, as mdtp plan evaluates it; --step-bytes: its exact bytes per (phase, group, op))\n"
      "  mdtp cost --preset llama2-70b --tp 8 --pp 8 --gpus 512 --dtype bf16 --cluster dgx-h100\n"
      "            (a published model; --model llama --kv-heads K --ffn-hidden F prices any Llama)\n"
      "  mdtp cost ... --write-config run.json; mpiexec -n N mdtp train --config run.json   (predict, then run)");
  o->spec = std::make_unique<SpecFlags>(*app, kAllSpecFlags, RunSpec{});
  add_layer_options(*app, *o);
  add_step_assumptions(*app, o->step);
  o->preset.add(*app);
  CLI::Option* zero = app->add_flag("--zero-table", o->zero_table,
                                    "print the ZeRO stages 0-3 instead (--params, --dp; or a GPT step's, with --heads)");
  add(*app, "--params", o->zero_config.parameters, "--zero-table: parameters Psi")->default_str("");
  add(*app, "--param-bytes", o->zero_config.param_bytes, "--zero-table: bytes per parameter");
  add(*app, "--grad-bytes", o->zero_config.grad_bytes, "--zero-table: bytes per gradient");
  CLI::Option* pipeline =
      app->add_flag("--pipeline", o->pipeline, "print the pipeline bubble instead (--pp, --micro-batches)");
  zero->excludes(pipeline);
  app->add_flag("--step-bytes", o->step_bytes,
                "GPT step: the exact bytes of one step per (phase, group, op), busiest stage and every stage");
  app->add_flag("--json", o->json, "print JSON instead of text");
  // In the layer form --batch was the layer's batch (rows = batch x seq): a micro-batch now.
  add_renamed_flags(*app, {{"--batch", "--micro-batch-size"},
                           {"--ffn", "--ffn-hidden"},
                           {"--world", "--dp (world = tp x pp x dp)"}});
  add_renamed_flags(*app, renamed_run_flags());
  return {app, false, [o, app](const std::string&) {
            if (app->count("--heads") > 0 || o->spec->config_given() || o->preset.given()) return run_model(*o, *app);
            if (o->zero_table) return run_zero(*o, *app);
            if (o->pipeline) return run_pipeline(*o, *app);
            return run_layer(*o, *app);
          }};
}

}  // namespace mdtp::cli
