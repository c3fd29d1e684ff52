#include "cost/step_report.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <sstream>

namespace mdtp::cost {

namespace {

using nlohmann::json;

json config_json(const StepConfig& c, std::int64_t microbatches) {
  return {{"model",
           {{"layers", c.spec.model.layers},
            {"hidden", c.spec.model.hidden},
            {"heads", c.spec.model.heads},
            {"seq", c.spec.model.seq},
            {"vocab", c.spec.model.vocab}}},
          {"global_batch", c.spec.global_batch},
          {"micro_batch", c.micro_batch()},
          {"microbatches", microbatches},
          {"tp_mode", tp_mode_name(c.spec.layout.mode)},
          {"tp", c.spec.layout.tp},
          {"depth", c.spec.layout.depth},
          {"pp", c.spec.layout.pp},
          {"dp", c.spec.layout.dp},
          {"gpus", c.gpus()},
          {"schedule", schedule_name(c.spec.layout.schedule)},
          {"chunks", c.spec.layout.chunks},
          {"zero", c.spec.zero.stage},
          {"zero_reduce_per_micro_batch", c.spec.zero.reduce_per_micro_batch},
          {"zero_keep_parameters", c.spec.zero.keep_parameters},
          {"recompute", recompute_name(c.spec.recompute)},
          {"dtype", dtype_name(c.dtype())},
          {"grad_dtype", dtype_name(c.grad_dtype())},
          {"dropout", c.dropout()},
          {"overlap", {{"dp_gradients", c.overlap.dp_gradients}, {"pp_p2p", c.overlap.pp_p2p}, {"tp", false}}}};
}

json estimate_object(const StepEstimate& e) {
  const TimeSplit& t = e.time;
  const MemorySplit& m = e.memory;
  return {{"description", describe(e.config)},
          {"config", config_json(e.config, e.microbatches)},
          {"step_s", e.step_seconds},
          {"tokens_per_s", e.tokens_per_second},
          {"tflops_per_gpu", e.tflops_per_gpu},
          {"mfu", e.mfu},
          {"hfu", e.hfu},
          {"model_flops", e.model_flops},
          {"hardware_flops", e.hardware_flops},
          {"bubble_fraction", e.bubble_fraction},
          {"memory_per_gpu_bytes", m.total()},
          {"memory_capacity_bytes", e.memory_capacity},
          {"fits", e.fits},
          {"time",
           {{"compute_s", t.compute},
            {"tp_comm_s", t.tp_comm},
            {"pp_comm_s", t.pp_comm},
            {"dp_comm_s", t.dp_comm},
            {"bubble_s", t.bubble},
            {"optimizer_s", t.optimizer}}},
          {"memory",
           {{"stage", m.stage},
            {"parameter_elements", m.parameter_elements},
            {"parameters_bytes", m.parameters},
            {"parameters_gathered_bytes", m.parameters_gathered},
            {"gradients_bytes", m.gradients},
            {"gradients_in_step_bytes", m.gradients_in_step},
            {"optimizer_bytes", m.optimizer},
            {"activations_bytes", m.activations},
            {"reserved_bytes", m.reserved},
            {"in_flight", m.in_flight}}},
          {"placement",
           {{"tp", link_class_name(e.placement.tp)},
            {"dp", link_class_name(e.placement.dp)},
            {"pp", link_class_name(e.placement.pp)}}}};
}

std::string gb(double bytes) { return fmt::format("{:.1f}", bytes / 1e9); }

std::string row_text(int rank, const StepEstimate& e) {
  const TimeSplit& t = e.time;
  const StepConfig& c = e.config;
  const std::string mode = c.spec.layout.mode == TpMode::d2p5 ? fmt::format("2.5d/{}", c.spec.layout.depth) : tp_mode_name(c.spec.layout.mode);
  const std::string schedule = c.spec.layout.schedule == ScheduleKind::interleaved
                                   ? fmt::format("interl.v{}", c.spec.layout.chunks)
                                   : std::string(schedule_name(c.spec.layout.schedule));
  return fmt::format(
      "{:>4} {:<7} {:>3} {:>3} {:>5} {:<11} {:>3} {:>4} {:<9} {:>9.3f} {:>10.4g} {:>7.1f} {:>5.1f} {:>5.1f} {:>6} "
      "{:>8.3f} {:>7.3f} {:>7.3f} {:>7.3f} {:>7.3f} {:>7.3f}\n",
      rank, mode, c.spec.layout.tp, c.spec.layout.pp, c.spec.layout.dp, schedule, c.micro_batch(), zero_label(c), recompute_name(c.spec.recompute), e.step_seconds,
      e.tokens_per_second, e.tflops_per_gpu, 100 * e.mfu, 100 * e.hfu, gb(e.memory.total()), t.compute, t.tp_comm,
      t.pp_comm, t.dp_comm, t.bubble, t.optimizer);
}

std::string header_text() {
  return fmt::format(
      "{:>4} {:<7} {:>3} {:>3} {:>5} {:<11} {:>3} {:>4} {:<9} {:>9} {:>10} {:>7} {:>5} {:>5} {:>6} {:>8} {:>7} {:>7} "
      "{:>7} {:>7} {:>7}\n",
      "rank", "mode", "tp", "pp", "dp", "schedule", "mb", "zero", "recompute", "step s", "tokens/s", "TFLOP/s", "MFU%",
      "HFU%", "mem GB", "compute", "tp", "pp", "dp", "bubble", "optim");
}

std::string cluster_line(const Cluster& c) {
  return fmt::format("cluster {} ({}; {} GPUs per node, {} collectives){}\n", c.name, c.gpu_name, c.gpus_per_node,
                     collective_library_name(c.library), c.path.empty() ? "" : " from " + c.path);
}

}  // namespace

std::string estimate_json(const StepEstimate& e, const Cluster& cluster) {
  json doc = estimate_object(e);
  doc["cluster"] = cluster.name;
  return doc.dump(2) + "\n";
}

std::string estimate_text(const StepEstimate& e, const Cluster& cluster) {
  std::ostringstream os;
  os << cluster_line(cluster) << describe(e.config) << ", " << e.microbatches << " micro-batches per replica\n";
  os << fmt::format("step {:.4f} s, {:.4g} tokens/s, {:.1f} TFLOP/s per GPU (recomputation included), MFU {:.1f}%, "
                    "HFU {:.1f}%\n",
                    e.step_seconds, e.tokens_per_second, e.tflops_per_gpu, 100 * e.mfu, 100 * e.hfu);
  const TimeSplit& t = e.time;
  os << fmt::format("time: compute {:.4f} s, tensor-parallel {:.4f} s, pipeline sends {:.4f} s, data-parallel {:.4f} s, "
                    "bubble {:.4f} s ({:.1f}%), optimizer {:.4f} s\n",
                    t.compute, t.tp_comm, t.pp_comm, t.dp_comm, t.bubble, 100 * e.bubble_fraction, t.optimizer);
  const MemorySplit& m = e.memory;
  // ZeRO-2/3: say how much of the gradients are full buckets held only inside the step, and at
  // stage 3 how much of the parameters are gathered buckets.
  const std::string in_step =
      m.gradients_in_step > 0 ? fmt::format(" ({} of it full buckets inside the step)", gb(m.gradients_in_step)) : "";
  const std::string gathered =
      m.parameters_gathered > 0 ? fmt::format(" ({} of it gathered inside the step)", gb(m.parameters_gathered)) : "";
  os << fmt::format("memory per GPU (stage {}): {} GB of {} GB{} — parameters {}{}, gradients {}{}, optimizer {}, "
                    "activations {} ({} in flight), reserved {}\n",
                    m.stage, gb(m.total()), gb(e.memory_capacity), e.fits ? "" : " (DOES NOT FIT)", gb(m.parameters),
                    gathered, gb(m.gradients), in_step, gb(m.optimizer), gb(m.activations), m.in_flight,
                    gb(m.reserved));
  os << fmt::format("links: tp {}, dp {}, pp {}\n", link_class_name(e.placement.tp), link_class_name(e.placement.dp),
                    link_class_name(e.placement.pp));
  return os.str();
}

std::string plan_json(const PlanRequest& r, const PlanResult& result, const Cluster& cluster, int top) {
  json configs = json::array();
  const std::size_t n = top > 0 ? std::min<std::size_t>(static_cast<std::size_t>(top), result.ranked.size())
                                : result.ranked.size();
  for (std::size_t i = 0; i < n; ++i) configs.push_back(estimate_object(result.ranked[i]));
  const json doc = {{"cluster", cluster.name},
                    {"model",
                     {{"layers", r.model.layers},
                      {"hidden", r.model.hidden},
                      {"heads", r.model.heads},
                      {"seq", r.model.seq},
                      {"vocab", r.model.vocab}}},
                    {"global_batch", r.global_batch},
                    {"gpus", r.gpus},
                    {"dtype", dtype_name(r.dtype)},
                    {"considered", result.considered},
                    {"refused", result.refused},
                    {"too_big", result.too_big},
                    {"feasible", result.ranked.size()},
                    {"configs", configs}};
  return doc.dump(2) + "\n";
}

std::string plan_text(const PlanRequest& r, const PlanResult& result, const Cluster& cluster, int top) {
  std::ostringstream os;
  os << cluster_line(cluster);
  os << fmt::format("model: {} layers, hidden {}, {} heads, seq {}, vocab {}; global batch {} on {} GPUs, {}\n",
                    r.model.layers, r.model.hidden, r.model.heads, r.model.seq, r.model.vocab, r.global_batch, r.gpus,
                    dtype_name(r.dtype));
  os << fmt::format("{} configurations fit ({} evaluated, {} over the GPU memory, {} shapes refused by the layouts)\n",
                    result.ranked.size(), result.considered, result.too_big, result.refused);
  if (result.ranked.empty()) return os.str();
  os << "times in seconds per step; TFLOP/s per GPU counts recomputation (hardware FLOPs); zero 2m/3m: "
        "gradients reduce-scattered after every micro-batch\n"
     << header_text();
  const std::size_t n = top > 0 ? std::min<std::size_t>(static_cast<std::size_t>(top), result.ranked.size())
                                : result.ranked.size();
  for (std::size_t i = 0; i < n; ++i) os << row_text(static_cast<int>(i + 1), result.ranked[i]);
  return os.str();
}

std::string validation_json(const Validation& v, const Cluster& cluster) {
  json rows = json::array();
  for (const auto& r : v.rows)
    rows.push_back({{"billions", r.row.billions},
                    {"heads", r.row.heads},
                    {"hidden", r.row.hidden},
                    {"layers", r.row.layers},
                    {"tp", r.row.tp},
                    {"pp", r.row.pp},
                    {"gpus", r.row.gpus},
                    {"batch", r.row.batch},
                    {"measured_tflops_per_gpu", r.row.tflops_per_gpu},
                    {"predicted_tflops_per_gpu", r.predicted},
                    {"error", r.error},
                    {"baseline_error", r.baseline_error},
                    {"estimate", estimate_object(r.estimate)}});
  const json doc = {{"cluster", cluster.name},          {"baseline_tflops_per_gpu", v.baseline_tflops},
                    {"max_error", v.max_error},         {"mean_abs_error", v.mean_abs_error},
                    {"baseline_max_error", v.baseline_max_error}, {"baseline_mean_abs_error", v.baseline_mean_abs_error},
                    {"rows", rows}};
  return doc.dump(2) + "\n";
}

std::string validation_text(const Validation& v, const Cluster& cluster) {
  std::ostringstream os;
  os << fmt::format("Narayanan et al. 2021, Table 1, predicted from {} (baseline: {:.1f} TFLOP/s for every row)\n\n",
                    cluster.name, v.baseline_tflops);
  os << "| params | heads | hidden | layers | TP | PP | GPUs | batch | schedule | measured | predicted | error | "
        "baseline error | compute | TP comm | PP comm | DP comm | bubble |\n";
  os << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : v.rows) {
    const StepEstimate& e = r.estimate;
    const double s = e.step_seconds;
    const std::string schedule = e.config.spec.layout.pp == 1 ? "-"
                                 : e.config.spec.layout.schedule == ScheduleKind::interleaved
                                     ? fmt::format("interleaved v={}", e.config.spec.layout.chunks)
                                     : std::string(schedule_name(e.config.spec.layout.schedule));
    os << fmt::format(
        "| {}B | {} | {} | {} | {} | {} | {} | {} | {} | {:.0f} | {:.1f} | {:+.1f}% | {:+.1f}% | {:.1f}% | {:.1f}% | "
        "{:.1f}% | {:.1f}% | {:.1f}% |\n",
        r.row.billions, r.row.heads, r.row.hidden, r.row.layers, r.row.tp, r.row.pp, r.row.gpus, r.row.batch, schedule,
        r.row.tflops_per_gpu, r.predicted, 100 * r.error, 100 * r.baseline_error, 100 * e.time.compute / s,
        100 * e.time.tp_comm / s, 100 * e.time.pp_comm / s, 100 * e.time.dp_comm / s, 100 * e.time.bubble / s);
  }
  os << fmt::format("\nmax |error| {:.1f}% (baseline {:.1f}%), mean |error| {:.1f}% (baseline {:.1f}%)\n",
                    100 * v.max_error, 100 * v.baseline_max_error, 100 * v.mean_abs_error,
                    100 * v.baseline_mean_abs_error);
  return os.str();
}

}  // namespace mdtp::cost
