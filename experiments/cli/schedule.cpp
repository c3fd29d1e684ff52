// `mdtp schedule`: a pipeline schedule as data (src/plan/schedule.hpp), without MPI — every
// stage's ordered action list, then what the whole-pipeline simulator (src/plan/schedule_sim.hpp)
// makes of it with unit pass times T_F = T_B = T_W = 1: each stage's busy and idle units, its
// bubble fraction beside the textbook formula, and the micro-batch contexts it holds at its peak.
// So a schedule can be read (and compared with a paper's figure) before any job is launched.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/commands.hpp"
#include "cli/spec_flags.hpp"
#include "plan/schedule.hpp"
#include "plan/schedule_sim.hpp"

namespace mdtp::cli {
namespace {

struct ScheduleOptions {
  std::unique_ptr<SpecFlags> spec;  // --schedule, --pp, --micro-batches, --chunks, --group-size, --config
  bool json = false;
};

// The idle share of the step the usual closed forms give with unit pass times, and the formula
// as text.  GPipe and 1F1B idle (p−1)(T_F + T_B + T_W) per stage; interleaved the same over v
// (each chunk is 1/v of a stage; exact when N divides m); ZB-H1 (p−1)(T_F + T_B − T_W), i.e.
// p − 1 units, against a busy time of 3·m units per stage (3·m·v interleaved).
struct BubbleFormula {
  std::string text;
  double fraction = 0.0;
};

BubbleFormula bubble_formula(const Schedule& s) {
  const double p = s.stages, m = s.micro_batches, v = s.chunks;
  switch (s.kind) {
    case ScheduleKind::gpipe:
    case ScheduleKind::one_f_one_b: return {"(p-1)/(m+p-1)", (p - 1) / (m + p - 1)};
    case ScheduleKind::interleaved: return {"(p-1)/(v*m+p-1)", (p - 1) / (v * m + p - 1)};
    case ScheduleKind::zb_h1: return {"(p-1)/(3*m+p-1)", (p - 1) / (3 * m + p - 1)};
    // ZB-H2 under mdtp's synchronous optimizer step: the parallelogram's p − 1 idle units per
    // stage remain (m >= 2p − 1); the paper's (p−1)(T_F+T_B−2T_W) = 0 needs post-validation.
    case ScheduleKind::zb_h2: return {"(p-1)/(3*m+p-1) (synchronous step, m>=2p-1)", (p - 1) / (3 * m + p - 1)};
    // ZB-V: 6m chunk units of work per stage in a makespan of 6m + p − 1 (the authors' greedy).
    case ScheduleKind::zb_v: return {"(p-1)/(6*m+p-1)", (p - 1) / (6 * m + p - 1)};
    // DualPipeV: the DualPipe README's (p−1)(F&B + B − 3W) chunk units, with B the full backward
    // (2) and F&B = 3 as mdtp runs it (no overlap): 2(p − 1) against 6m of work.
    case ScheduleKind::dualpipev: return {"2*(p-1)/(6*m+2*(p-1)) (F&B=3, B=2, W=1)", 2 * (p - 1) / (6 * m + 2 * (p - 1))};
    // DualPipe: the README's (p/2 − 1)(F&B + B − 3W) with the same unit times, against 6·(m/2)
    // units of work per stage (two chunks of m/2 micro-batches, 3 units each).
    case ScheduleKind::dualpipe: return {"2*(p/2-1)/(3*m+2*(p/2-1)) (F&B=3, B=2, W=1)", 2 * (p / 2 - 1) / (3 * m + 2 * (p / 2 - 1))};
  }
  return {};
}

// "F3" for one chunk per stage, "F3.1" (micro-batch 3, chunk 1) for several; an overlapped F&B
// pair as "F3.0&BW1.1".
std::string action_text(const Action& a, int chunks) {
  const std::string text = chunks > 1 ? fmt::format("{}{}.{}", pass_name(a.op), a.microbatch, a.chunk)
                                      : fmt::format("{}{}", pass_name(a.op), a.microbatch);
  return a.overlapped ? text + "&" : text;
}

// Whether action i of a stage's list is half of an overlapped F&B pair (the forward is marked).
bool in_pair(const std::vector<Action>& list, std::size_t i) {
  return list[i].overlapped || (i > 0 && list[i - 1].overlapped);
}

nlohmann::ordered_json to_json(const Schedule& s, const Simulation& sim, const std::vector<PeakContexts>& peaks) {
  const BubbleFormula formula = bubble_formula(s);
  nlohmann::ordered_json stages = nlohmann::ordered_json::array();
  for (int r = 0; r < s.stages; ++r) {
    const auto i = static_cast<std::size_t>(r);
    nlohmann::ordered_json actions = nlohmann::ordered_json::array();
    const std::vector<Action>& list = s.actions[i];
    for (std::size_t k = 0; k < list.size(); ++k) {
      const Action& a = list[k];
      nlohmann::ordered_json action = {{"op", pass_name(a.op)},
                                       {"microbatch", a.microbatch},
                                       {"chunk", a.chunk},
                                       {"virtual_stage", s.virtual_stage(r, a.chunk)},
                                       {"direction", s.direction(r, a.chunk) > 0 ? "down" : "up"}};
      if (in_pair(list, k)) action["pair"] = "F&B";
      actions.push_back(std::move(action));
    }
    stages.push_back({{"stage", r},
                      {"actions", actions},
                      {"warmup_forwards", forwards_before_first_backward(s, r)},
                      {"busy_units", sim.busy[i]},
                      {"idle_units", sim.idle[i]},
                      {"bubble_fraction", sim.makespan > 0 ? sim.idle[i] / sim.makespan : 0.0},
                      {"peak_contexts", {{"full", peaks[i].full}, {"weight_only", peaks[i].weight_only},
                                         {"total", peaks[i].total}}}});
  }
  double worst = 0.0;
  for (std::size_t i = 0; i < sim.idle.size(); ++i) worst = std::max(worst, sim.idle[i] / sim.makespan);
  return {{"schedule", schedule_name(s.kind)},
          {"pp", s.stages},
          {"micro_batches", s.micro_batches},
          {"chunks", s.chunks},
          {"group_size", s.group_size},
          {"stage_mapping", stage_mapping_name(s.mapping)},
          {"loss_stages", s.loss_stages()},
          {"parameter_copies", s.parameter_copies()},
          {"unit_times", {{"forward", 1.0}, {"backward_input", 1.0}, {"backward_weight", 1.0}}},
          {"makespan_units", sim.makespan},
          {"bubble", {{"simulated_fraction", worst}, {"formula", formula.text}, {"formula_fraction", formula.fraction}}},
          {"stages", stages}};
}

std::string to_text(const Schedule& s, const Simulation& sim, const std::vector<PeakContexts>& peaks) {
  std::ostringstream os;
  os << fmt::format("schedule {}: pp={} micro-batches={} chunks={}", schedule_name(s.kind), s.stages,
                    s.micro_batches, s.chunks);
  if (s.kind == ScheduleKind::interleaved) os << fmt::format(" group-size={}", s.group_size);
  os << fmt::format(" stage-mapping={} (loss on stage {}; {} of the parameters)", stage_mapping_name(s.mapping),
                    fmt::join(s.loss_stages(), " and "), s.parameter_copies() == 1 ? "one copy" : "two copies");
  os << "\n";
  if (s.mapping == StageMapping::v_shape)
    os << "(V order: chunk 0 of stage r is virtual stage r, chunk 1 is 2p-1-r; X&Y: an F&B pair, run in turn)\n";
  if (s.mapping == StageMapping::mirrored)
    os << fmt::format("(mirrored: stage r holds positions r and p-1-r, chunk 0 the lower; micro-batches 0-{} run down "
                      "from stage 0, {}-{} up from stage p-1; X&Y: an F&B pair, run in turn)\n",
                      s.micro_batches / 2 - 1, s.micro_batches / 2, s.micro_batches - 1);
  os << (s.chunks > 1 ? "actions per stage (pass, micro-batch.chunk; BW = fused backward):\n"
                      : "actions per stage (pass, micro-batch; BW = fused backward):\n");
  for (int r = 0; r < s.stages; ++r) {
    os << fmt::format("  stage {:>2} |", r);
    for (const Action& a : s.actions[static_cast<std::size_t>(r)]) os << " " << action_text(a, s.chunks);
    os << "\n";
  }
  os << fmt::format("\nsimulated with T_F = T_B = T_W = 1 (BW = 2): makespan {:g} units\n", sim.makespan);
  os << fmt::format("  {:>5}  {:>7}  {:>6}  {:>6}  {:>8}  {:>11}  {:>11}  {:>11}\n", "stage", "warm-up", "busy",
                    "idle", "bubble", "peak full", "peak W-only", "peak total");
  double worst = 0.0;
  for (int r = 0; r < s.stages; ++r) {
    const auto i = static_cast<std::size_t>(r);
    const double fraction = sim.makespan > 0 ? sim.idle[i] / sim.makespan : 0.0;
    worst = std::max(worst, fraction);
    os << fmt::format("  {:>5}  {:>7}  {:>6g}  {:>6g}  {:>8.4f}  {:>11}  {:>11}  {:>11}\n", r,
                      forwards_before_first_backward(s, r), sim.busy[i], sim.idle[i], fraction, peaks[i].full,
                      peaks[i].weight_only, peaks[i].total);
  }
  const BubbleFormula formula = bubble_formula(s);
  os << fmt::format("bubble fraction (idle / makespan, worst stage): simulated {:.4f}; formula {} = {:.4f}\n", worst,
                    formula.text, formula.fraction);
  os << "(warm-up: forwards before the first backward-input pass; peak: micro-batch contexts held at once,\n"
        " full = forward done and backward-input not yet, W-only = only what the weight pass still needs)\n";
  return os.str();
}

}  // namespace

Command add_schedule(CLI::App& root) {
  auto o = std::make_shared<ScheduleOptions>();
  CLI::App* app =
      add_command(root, "schedule", "print a pipeline schedule's per-stage actions, bubble and peak contexts (no MPI)");
  app->footer(
      "Every stage's ordered actions (F forward, B backward-input, W weight pass, BW both) and the simulated\n"
      "bubble and peak contexts with unit pass times (docs/pipeline.md).\n"
      "  mdtp schedule --schedule zb-h1 --pp 4 --micro-batches 8\n"
      "  mdtp schedule --schedule zb-v --pp 4 --micro-batches 8\n"
      "  mdtp schedule --schedule interleaved --pp 4 --micro-batches 8 --chunks 2 --json");
  o->spec = std::make_unique<SpecFlags>(*app, kPipelineFlags | kConfigFlags, RunSpec{});
  app->add_flag("--json", o->json, "print JSON for tools instead of the table");
  add_renamed_flags(*app, renamed_run_flags());
  return {app, false, [o, app](const std::string&) {
            if (!o->spec->config_given())
              for (const char* option : {"--pp", "--micro-batches"})
                require(app->count(option) > 0, "mdtp schedule needs ", option, " (mdtp schedule --help)");
            const ParallelLayout l = o->spec->resolve().layout;
            const Schedule s = make_schedule(l.schedule, l.pp, l.micro_batches, l.chunks, l.group_size);
            const Simulation sim = simulate(s, PassTimes{});
            const std::vector<PeakContexts> peaks = peak_contexts(s);
            if (o->json)
              std::cout << to_json(s, sim, peaks).dump(2) << "\n";
            else
              std::cout << to_text(s, sim, peaks);
            return 0;
          }};
}

}  // namespace mdtp::cli
