#include "train/results_writer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "io/results_file.hpp"
#include "run/provenance.hpp"
#include "run/root_task.hpp"
#include "spec/run_spec_json.hpp"

namespace mdtp {
namespace {

// The training settings as flat attributes (what the analysis scripts read), all from the resolved
// spec and the plan, beside the spec itself as JSON (`run_spec`: what `--config` reads back).
Attributes training_attributes(const TrainPlan& plan) {
  const RunSpec& spec = plan.spec;
  const ParallelLayout& l = spec.layout;
  const ModelShape& m = plan.spec.model;
  const std::string layers = fmt::format("{}", fmt::join(plan.partition.blocks(), ","));
  return {{"run_spec", run_spec_text(spec)},
          {"tp", std::int64_t{l.tp}},
          {"tp_depth", std::int64_t{l.depth}},
          {"dp", std::int64_t{l.dp}},
          {"pp", std::int64_t{l.pp}},
          {"schedule", std::string(schedule_name(plan.schedule.kind))},
          {"micro_batches", std::int64_t{plan.schedule.micro_batches}},
          {"micro_batch", plan.micro_batch},
          {"chunks", std::int64_t{plan.schedule.chunks}},
          {"group_size", std::int64_t{plan.schedule.group_size}},
          {"stage_mapping", std::string(stage_mapping_name(plan.schedule.mapping))},
          {"pp_layers", layers},
          {"stage_units", plan.partition.describe()},
          {"vocab_size", m.vocab},
          {"n_layer", m.layers},
          {"n_head", m.heads},
          {"n_embd", m.hidden},
          {"block_size", m.seq},
          {"batch", spec.global_batch},
          {"optimizer", std::string(optimizer_kind_name(spec.optimizer.kind))},
          {"lr", spec.optimizer.lr},
          {"grad_clip", spec.optimizer.grad_clip},
          {"recompute", std::string(recompute_name(spec.recompute))},
          {"zero_stage", std::int64_t{spec.zero.stage}},
          {"zero_bucket_mb", spec.zero.bucket_mb},
          {"zero_offload", std::int64_t{spec.zero.offload ? 1 : 0}},
          {"zero_keep_parameters", std::int64_t{spec.zero.keep_parameters ? 1 : 0}},
          {"zero_reduce_per_micro_batch", std::int64_t{spec.zero.reduce_per_micro_batch ? 1 : 0}},
          {"seed", static_cast<std::int64_t>(spec.seed)},
          {"data", plan.data.source}};
}

}  // namespace

void write_train_results(const TrainConfig& tc, const TrainPlan& plan, TrainRig& rig, const TrainResult& result,
                         const RunEnding& ending, const CommAudit& comm, const std::map<std::string, Table>& tables) {
  CommLedger& ledger = rig.ledger();
  ledger.set_enabled(false);
  Attributes attrs = run::collect_provenance(
      rig.mesh(), rig.world(),
      {tc.command_line, tp_mode_name(plan.spec.layout.mode), dtype_name(plan.spec.precision.params), rig.backend().name()});
  ledger.set_enabled(true);
  const Attributes training = training_attributes(plan);
  attrs.insert(training.begin(), training.end());
  attrs["skipped_nonfinite_steps"] = ending.skipped_nonfinite;
  attrs["overflow_skipped_steps"] = ending.overflow_steps;
  attrs["stopped_by"] = ending.stopped_by;
  attrs["setup_model_seconds"] = result.setup_model_seconds;
  attrs["setup_optimizer_seconds"] = result.setup_optimizer_seconds;
  // Why the ledger table has no model beside it ("" when the whole-step plan covers the run).
  attrs["comm_model_uncovered"] = comm.uncovered_reason();
  // The paper's ZeRO figures beside rank 0's ledger and plan, first step (cost/zero.hpp).
  const cost::ZeroPaperTraffic& paper = comm.paper_traffic();
  attrs["zero_paper_psi"] = paper.psi;
  attrs["zero_paper_factor"] = std::int64_t{paper.factor};
  attrs["zero_paper_dp_bus_bytes"] = paper.paper_bus_bytes;
  attrs["zero_ledger_dp_bus_bytes"] = paper.ledger_bus_bytes;
  attrs["zero_model_dp_bus_bytes"] = paper.model_bus_bytes;
  attrs["zero_paper_differences"] = paper.why;
  run::run_on_root(rig.world(), [&] {
    if (!tc.extra_tables) {
      ResultsFile(tc.out).append_run("train", attrs, tables);
      return;
    }
    std::map<std::string, Table> all = tables;
    all.merge(tc.extra_tables(static_cast<std::int64_t>(result.steps.size())));  // the trainer's own keep a name both give
    ResultsFile(tc.out).append_run("train", attrs, all);
  });
}

}  // namespace mdtp
