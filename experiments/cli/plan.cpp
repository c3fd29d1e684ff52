// `mdtp plan`: the whole training step of a GPT on a cluster, from the analytic model
// (src/cost/step_model.hpp, docs/performance-model.md), without MPI.  Three forms:
//   search      every feasible configuration that fits, ranked by predicted step time (--top N)
//   one config  --tp-mode given: that configuration's step time, throughput, MFU/HFU, memory, split
//   validate    --validate: the Narayanan et al. 2021 table, measured beside predicted
#include <iostream>
#include <memory>
#include <optional>

#include "cli/commands.hpp"
#include "cli/step_options.hpp"
#include "cost/planner.hpp"
#include "cost/step_report.hpp"

namespace mdtp::cli {
namespace {

struct PlanOptions {
  cost::GptShape model;
  std::int64_t global_batch = 0;
  int gpus = 0;
  std::string cluster = "dgx-a100";
  DType dtype = DType::bf16;
  bool json = false, validate = false, no_dropout = false, no_dp_overlap = false, p2p_overlap = false;
  bool streaming_attention = false, zero_reduce_per_micro_batch = false, zero_keep_parameters = false;
  int top = 10, max_tp = 64;
  std::int64_t max_micro_batch = 16;
  std::vector<TpMode> modes;
  // One configuration (given --tp-mode).
  TpMode mode = TpMode::d1;
  int tp = 1, depth = 1, pp = 1, chunks = 1, zero = 0;
  std::int64_t micro_batch = 1;
  std::string schedule = "1f1b", recompute = "none";
};

// Every option of the command, in one place.
void add_plan_options(CLI::App& app, PlanOptions& o) {
  add(app, "--layers", o.model.layers, "transformer layers l")->default_str("");
  add(app, "--hidden", o.model.hidden, "hidden size h")->default_str("");
  add(app, "--heads", o.model.heads, "attention heads a")->default_str("");
  add(app, "--seq", o.model.seq, "sequence length s")->default_str("");
  add(app, "--vocab", o.model.vocab, "vocabulary V")->default_str("");
  add(app, "--global-batch", o.global_batch, "sequences per step B")->default_str("");
  add(app, "--gpus", o.gpus, "GPUs in the job")->default_str("");
  add(app, "--cluster", o.cluster, "a name in data/clusters/ (dgx-a100, dgx-h100) or a path to a cluster JSON");
  add_dtype(app, "--dtype", o.dtype, "parameter and activation type (bf16, f16, f32)");
  app.add_flag("--json", o.json, "print JSON for tools");
  add(app, "--top", o.top, "configurations printed (0: all)");
  add(app, "--max-tp", o.max_tp, "search: the largest tensor-parallel size tried");
  add(app, "--max-micro-batch", o.max_micro_batch, "search: the largest micro-batch tried");
  add_parsed_list(app, "--modes", o.modes, parse_tp_mode, "search: the TP modes tried");
  app.add_flag("--no-dropout", o.no_dropout, "the model has no dropout (mdtp's GPT): no masks stored or streamed");
  app.add_flag("--streaming-attention", o.streaming_attention,
               "the attention kernel keeps no T×T probabilities (FlashAttention-style): selective = none");
  app.add_flag("--no-dp-overlap", o.no_dp_overlap, "gradients reduced after backward, not under it");
  app.add_flag("--p2p-overlap", o.p2p_overlap, "pipeline sends hidden under compute");
  app.add_flag("--validate", o.validate, "print the Narayanan et al. 2021 validation table instead");
  add_tp_mode(app, "--tp-mode", o.mode, "one configuration: its TP mode (with --tp, --pp, ...)");
  add(app, "--tp", o.tp, "one configuration: tensor-parallel size");
  add(app, "--tp-depth", o.depth, "one configuration: 2.5d depth d");
  add(app, "--pp", o.pp, "one configuration: pipeline stages");
  add(app, "--micro-batch", o.micro_batch, "one configuration: sequences per micro-batch");
  add(app, "--schedule", o.schedule, "one configuration: pipeline schedule")
      ->check(one_of({"gpipe", "1f1b", "interleaved", "zb-h1"}));
  add(app, "--chunks", o.chunks, "one configuration: model chunks per stage (interleaved)");
  add(app, "--zero", o.zero, "one configuration: ZeRO stage 0-3");
  app.add_flag("--zero-reduce-per-micro-batch", o.zero_reduce_per_micro_batch,
               "one configuration: ZeRO 2-3 reduce the gradients after every micro-batch");
  app.add_flag("--zero-keep-params", o.zero_keep_parameters,
               "one configuration: ZeRO 3 gathers each unit's parameters once per step and keeps them");
  add(app, "--recompute", o.recompute, "one configuration: activation recomputation")
      ->check(one_of({"none", "selective", "full"}));
}

void require_model(const CLI::App& app) {
  for (const char* option : {"--layers", "--hidden", "--heads", "--seq", "--vocab", "--global-batch", "--gpus"})
    require(app.count(option) > 0, "mdtp plan needs ", option, " (mdtp plan --help)");
}

cost::OverlapAssumptions overlap_of(const PlanOptions& o) {
  cost::OverlapAssumptions overlap;
  overlap.dp_gradients = !o.no_dp_overlap;
  overlap.pp_p2p = o.p2p_overlap;
  return overlap;
}

int run_one(const PlanOptions& o, const cost::Cluster& cluster) {
  const cost::StepEstimate e = cost::estimate_step(
      step_config(StepChoice{o.model, o.global_batch, o.micro_batch, o.mode, o.tp, o.depth, o.pp, o.gpus, o.chunks,
                             o.zero, o.schedule, o.recompute, o.dtype, !o.no_dropout, overlap_of(o),
                             !o.streaming_attention, o.zero_reduce_per_micro_batch, o.zero_keep_parameters}),
      cluster);
  std::cout << (o.json ? cost::estimate_json(e, cluster) : cost::estimate_text(e, cluster));
  return 0;
}

int run_search(const PlanOptions& o, const cost::Cluster& cluster) {
  cost::PlanRequest r;
  r.model = o.model;
  r.global_batch = o.global_batch;
  r.gpus = o.gpus;
  r.dtype = o.dtype;
  r.dropout = !o.no_dropout;
  r.attention_keeps_probabilities = !o.streaming_attention;
  r.overlap = overlap_of(o);
  r.max_tp = o.max_tp;
  r.max_micro_batch = o.max_micro_batch;
  r.modes = o.modes;
  const cost::PlanResult result = cost::plan(r, cluster);
  std::cout << (o.json ? cost::plan_json(r, result, cluster, o.top) : cost::plan_text(r, result, cluster, o.top));
  return 0;
}

}  // namespace

Command add_plan(CLI::App& root) {
  auto o = std::make_shared<PlanOptions>();
  CLI::App* app = add_command(root, "plan", "rank every parallel configuration of a GPT by its predicted step time (no MPI)");
  app->footer(
      "The whole training step of a GPT on a cluster, from the analytic model (docs/performance-model.md).\n"
      "  mdtp plan --layers 32 --hidden 4096 --heads 32 --seq 2048 --vocab 51200 --global-batch 512 --gpus 64\n"
      "  mdtp plan ... --tp-mode 1d --tp 8 --pp 4 --micro-batch 1 --schedule interleaved --chunks 2 --recompute full\n"
      "  mdtp plan --validate [--cluster dgx-a100]");
  add_plan_options(*app, *o);
  return {app, false, [o, app](const std::string&) {
            const cost::Cluster cluster = cost::load_cluster(cost::find_cluster(o->cluster));
            if (o->validate) {
              const cost::Validation v = cost::validate_narayanan(cluster);
              std::cout << (o->json ? cost::validation_json(v, cluster) : cost::validation_text(v, cluster));
              return 0;
            }
            require_model(*app);
            return app->count("--tp-mode") > 0 ? run_one(*o, cluster) : run_search(*o, cluster);
          }};
}

}  // namespace mdtp::cli
