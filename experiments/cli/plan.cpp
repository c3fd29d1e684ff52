// `mdtp plan`: the whole training step of a GPT on a cluster, from the analytic model
// (src/cost/step_model.hpp, docs/performance-model.md), without MPI.  Three forms:
//   search      every feasible configuration that fits, ranked by predicted step time (--top N); every
//               run flag given (--tp-mode, --tp, --pp, --zero, ...) fixes its axis
//   validate    --validate: every measured table (cost/measured_tables.hpp), measured beside predicted
// One configuration's whole breakdown is `mdtp cost`'s GPT-step form.
#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "cli/commands.hpp"
#include "cli/preset_option.hpp"
#include "cli/spec_flags.hpp"
#include "cli/step_options.hpp"
#include "io/output_path.hpp"
#include "cost/planner.hpp"
#include "cost/step_report.hpp"

namespace mdtp::cli {
namespace {

struct PlanOptions {
  StepAssumptions step;
  bool json = false, validate = false;
  std::vector<std::string> tables;  // --table: keys of shipped tables or paths to table files
  int top = 10, max_tp = 64, rank = 1;
  std::int64_t max_micro_batch = 16;
  std::vector<TpMode> modes;
  PresetOption preset;  // --preset: a published model under the flags
  std::unique_ptr<SpecFlags> spec;
};

// The options of the command beyond the run flags and the step assumptions.
void add_plan_options(CLI::App& app, PlanOptions& o) {
  app.add_flag("--json", o.json, "print JSON for tools");
  add(app, "--top", o.top, "configurations printed (0: all)");
  add(app, "--max-tp", o.max_tp, "search: the largest tensor-parallel size tried");
  add(app, "--max-micro-batch", o.max_micro_batch, "search: the largest micro-batch size tried");
  add_parsed_list(app, "--modes", o.modes, parse_tp_mode, "search: the TP modes tried (--tp-mode fixes one)");
  add(app, "--rank", o.rank, "with --write-config: write the layout ranked K (1: the quickest)")
      ->check(at_least(1));
  CLI::Option* validate =
      app.add_flag("--validate", o.validate,
                   "hold the model against every shipped table of measured runs (data/measured/: Narayanan et al. 2021 "
                   "and Korthikanti et al. 2022 on DGX A100, the Megatron-LM README's H100 weak scaling), each on its "
                   "own cluster unless --cluster is given");
  app.add_option("--table", o.tables,
                 "with --validate: only these tables, each a shipped key (korthikanti-2022, megatron-h100, "
                 "narayanan-2021) or a path to a table file in the same format (docs/performance-model.md)")
      ->needs(validate);
}

// --validate reads every run's model, layout and switches from its table (the rule and the row): an
// option that would set them, or shape a search, is refused by name rather than dropped.
void refuse_beside_validate(const CLI::App& app) {
  static const std::set<std::string> applies = {"help", "validate", "table", "json", "cluster", "nccl-algo",
                                                "own-collectives"};
  for (const CLI::Option* option : app.get_options()) {
    if (option->count() == 0 || option->get_lnames().empty()) continue;
    const std::string& name = option->get_lnames().front();
    require(applies.count(name) > 0, "--", name, " does not apply to --validate: each table's rule and rows set ",
            "the runs (--table FILE validates your own table; --cluster, --nccl-algo and --own-collectives price it ",
            "on another fabric)");
  }
}

// The search: the model, batch and precision from the spec; every axis the command line gave (or
// --tp-mode) fixed, the rest searched.
cost::PlanRequest request(const PlanOptions& o, const RunSpec& spec) {
  const SpecFlags& f = *o.spec;
  cost::PlanRequest r;
  r.base = o.step.step(spec);  // the model, batch, precision, dropout and every step switch, as `cost` prices them
  r.gpus = o.step.gpus > 0 ? o.step.gpus : spec.layout.world();
  r.max_tp = o.max_tp;
  r.max_micro_batch = o.max_micro_batch;
  r.modes = o.modes;
  const ParallelLayout& l = spec.layout;
  if (f.given("--tp-mode")) {
    require(o.modes.empty() || std::find(o.modes.begin(), o.modes.end(), l.mode) != o.modes.end(), "--tp-mode ",
            tp_mode_name(l.mode), " is not among --modes");
    r.modes = {l.mode};
  }
  if (f.given("--tp")) r.fixed.tp = l.tp;
  if (f.given("--tp-depth")) r.fixed.depth = l.depth;
  if (f.given("--pp")) r.fixed.pp = l.pp;
  if (f.given("--dp")) r.fixed.dp = l.dp;
  if (f.given("--schedule")) r.fixed.schedule = l.schedule;
  if (f.given("--chunks")) r.fixed.chunks = l.chunks;
  if (f.given("--group-size") && l.group_size > 0) r.fixed.group_size = l.group_size;
  if (f.given("--micro-batches")) r.fixed.micro_batches = l.micro_batches;
  if (f.micro_batch_size()) r.fixed.micro_batch_size = *f.micro_batch_size();
  if (f.given("--zero")) r.zero_stages = {spec.zero.stage};
  // A ZeRO option fixes the stages it applies to; beside a stage it does not apply to, it is refused.
  if (f.given("--zero-reduce-per-micro-batch")) {
    require(!f.given("--zero") || spec.zero.stage >= 2,
            "zero.reduce_per_micro_batch needs ZeRO stage 2 or 3; got stage ", spec.zero.stage);
    if (!f.given("--zero")) r.zero_stages = {2, 3};
    r.fixed.zero_reduce_per_micro_batch = true;
  }
  if (f.given("--zero-keep-params")) {
    require(!f.given("--zero") || spec.zero.stage == 3, "zero.keep_parameters needs ZeRO stage 3; got stage ",
            spec.zero.stage);
    r.zero_stages = {3};
    r.fixed.zero_keep_parameters = true;
  }
  // Offload asked for: the search runs stages 1-3 offloaded (PlanRequest::base), or the one given.
  if (f.given("--zero-offload"))
    require(!f.given("--zero") || spec.zero.stage >= 1, "zero.offload needs ZeRO stage 1, 2 or 3; got stage ",
            spec.zero.stage);
  if (f.given("--recompute")) r.recomputes = {spec.recompute};
  if (!l.pp_layers.empty()) {
    require(f.given("--pp") && (l.schedule != ScheduleKind::interleaved || f.given("--chunks")),
            "--pp-layers fixes the stage split: give --pp (and --chunks for the interleaved schedule) with it");
    r.fixed.pp_layers = l.pp_layers;
  }
  return r;
}

int run_search(const PlanOptions& o, const cost::Cluster& cluster, const CLI::App& app) {
  const RunSpec spec = o.preset.resolve(*o.spec);
  if (!o.spec->config_given() && !o.preset.given())
    for (const char* option : {"--layers", "--hidden", "--heads", "--seq", "--vocab", "--global-batch", "--gpus"})
      require(app.count(option) > 0, "mdtp plan needs ", option, " (mdtp plan --help)");
  if (o.preset.given()) require(app.count("--gpus") > 0, "mdtp plan needs --gpus (mdtp plan --help)");
  validate_model(spec.model);
  if (!o.spec->write_config_path().empty()) check_text_output(o.spec->write_config_path(), "--write-config");
  require(app.count("--rank") == 0 || !o.spec->write_config_path().empty(), "--rank ", o.rank,
          " picks the layout --write-config writes; without --write-config the table lists every rank (--top)");
  const cost::PlanRequest r = request(o, spec);
  const cost::PlanResult result = cost::plan(r, cluster);
  require(!result.ranked.empty(), "no configuration to rank: ", result.why_empty, " (", result.considered,
          " evaluated, ", result.too_big, " over the GPU memory, ", result.refused, " refused)");
  if (!o.spec->write_config_path().empty()) {
    // --rank counts the table's rows: one per layout, at its quickest micro-batch size.
    const std::vector<cost::LayoutRow> layouts = cost::collapse_layouts(result.ranked);
    require(o.rank <= static_cast<int>(layouts.size()), "--rank ", o.rank, " but only ", layouts.size(),
            " layouts fit");
    // The configuration as ranked: what the search does not vary is the asked spec's (PlanRequest::base).
    o.spec->write_config(result.ranked[layouts[static_cast<std::size_t>(o.rank - 1)].index].config.spec);
  }
  if (!o.json) std::cout << o.preset.line(spec);
  std::cout << (o.json ? cost::plan_json(r, result, cluster, o.top) : cost::plan_text(r, result, cluster, o.top));
  return 0;
}

}  // namespace

Command add_plan(CLI::App& root) {
  auto o = std::make_shared<PlanOptions>();
  CLI::App* app = add_command(root, "plan", "rank every parallel configuration of a GPT by its predicted step time (no MPI)");
  app->footer(
      "The whole training step of a GPT on a cluster, from the analytic model (docs/performance-model.md).  Every\n"
      "run flag given fixes that axis (mode, tp, depth, pp, dp, schedule, chunks, micro-batches, ZeRO, recompute);\n"
      "the rest is searched.\n"
      "  mdtp plan --layers 32 --hidden 4096 --heads 32 --seq 2048 --vocab 51200 --global-batch 512 --gpus 64\n"
      "  mdtp plan ... --tp 8 --pp 4 --dtype bf16 --dropout 0.1        (only tp 8, pp 4 layouts)\n"
      "  mdtp plan ... --write-config best.json [--rank 2]; mpiexec -n N mdtp train --config best.json\n"
      "  mdtp plan --preset llama2-70b --gpus 512 --cluster dgx-h100   (a published model; flags override it)\n"
      "  mdtp plan --validate [--table KEY|FILE ...] [--json]");
  o->spec = std::make_unique<SpecFlags>(*app, kAllSpecFlags, RunSpec{});
  add_step_assumptions(*app, o->step);
  o->preset.add(*app);
  add_plan_options(*app, *o);
  add_renamed_flags(*app, renamed_run_flags());
  return {app, false, [o, app](const std::string&) {
            const cost::Cluster cluster = o->step.cluster_at(o->step.cluster);
            if (o->validate) {
              refuse_beside_validate(*app);
              // Each table on the cluster it was measured on, unless --cluster names another.
              const bool named = app->count("--cluster") > 0;
              // Every table read (and any bad file refused) before anything is printed.
              std::vector<cost::MeasuredTable> tables;
              if (o->tables.empty()) tables = cost::measured_tables();
              for (const std::string& t : o->tables) tables.push_back(cost::measured_table(t));
              std::string out;
              for (const cost::MeasuredTable& table : tables) {
                const cost::Cluster on = named ? cluster : o->step.cluster_at(table.cluster);
                const cost::Validation v = cost::validate(table, on);
                out += out.empty() ? "" : (o->json ? ",\n" : "\n");
                out += o->json ? cost::validation_json(v, on) : cost::validation_text(v, on);
              }
              std::cout << (o->json ? "[\n" + out + "]\n" : out);
              return 0;
            }
            return run_search(*o, cluster, *app);
          }};
}

}  // namespace mdtp::cli
