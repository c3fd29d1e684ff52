#include "cost/step_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <limits>
#include <sstream>

#include "cost/offload_cost.hpp"

namespace mdtp::cost {

namespace {

using nlohmann::json;

json model_json(const ModelShape& m) {
  return {{"family", model_family_name(m.family)},
          {"layers", m.layers},
          {"hidden", m.hidden},
          {"heads", m.heads},
          {"kv_heads", m.kv()},
          {"ffn_hidden", m.ffn()},
          {"seq", m.seq},
          {"vocab", m.vocab},
          {"tied_head", m.tied_head}};
}

// "gpt2: 24 layers, hidden 2304, 24 heads, seq 2048, vocab 51200" (+ "kv 8, ffn 28672, untied
// head" where they differ from GPT-2's).
std::string model_text(const ModelShape& m) {
  std::string out = fmt::format("{}: {} layers, hidden {}, {} heads", model_family_name(m.family), m.layers, m.hidden,
                                m.heads);
  if (m.kv() != m.heads) out += fmt::format(" (kv {})", m.kv());
  if (m.ffn() != 4 * m.hidden) out += fmt::format(", ffn {}", m.ffn());
  out += fmt::format(", seq {}, vocab {}", m.seq, m.vocab);
  if (!m.tied_head) out += ", untied head";
  return out;
}

json config_json(const StepConfig& c, std::int64_t microbatches) {
  return {{"model", model_json(c.spec.model)},
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
          {"zero_offload", c.spec.zero.offload},
          {"recompute", recompute_name(c.spec.recompute)},
          {"dtype", dtype_name(c.dtype())},
          {"grad_dtype", dtype_name(c.grad_dtype())},
          {"dropout", c.dropout()},
          {"overlap",
           {{"dp_gradients", c.overlap.dp_gradients},
            {"pp_p2p", c.overlap.pp_p2p},
            {"tp", c.overlap.tp_comm && c.spec.layout.mode == TpMode::d1_sp},  // --tp-comm-overlap, where it applies
            {"param_gather", c.overlap.param_gather},
            // Megatron's always-on 1D overlap of the backward TP collectives with the dW GEMMs, where it applies
            {"tp_backward", c.overlap.tp_backward &&
                                is_megatron_1d(c.spec.layout.mode)}}},
          {"streaming_attention", !c.attention_keeps_probabilities},
          {"gradient_accumulation_fusion", c.gradient_accumulation_fusion},
          {"cross_entropy_fusion", c.cross_entropy_fusion},
          {"p2p_scatter_gather", c.p2p_scatter_gather},
          {"grad_nan_check", c.grad_nan_check},
          {"engine_kernels", c.engine_kernels}};
}

json estimate_object(const StepEstimate& e) {
  const TimeSplit& t = e.time;
  const MemorySplit& m = e.memory;
  json doc = {{"description", describe(e.config)},
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
          // time.compute_s by kernel class (not a term of the time split: its parts)
          {"compute",
           {{"gemm_s", e.compute.gemm_seconds},
            {"gemm_flops", e.compute.gemm_flops},
            {"stream_s", e.compute.stream_seconds},
            {"stream_bytes", e.compute.stream_bytes}}},
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
          {"traffic",
           {{"tp_bytes", e.traffic.tp_bytes}, {"pp_bytes", e.traffic.pp_bytes}, {"dp_bytes", e.traffic.dp_bytes}}},
          {"placement",
           {{"tp", link_class_name(e.placement.tp.link)},
            {"dp", link_class_name(e.placement.dp.link)},
            {"pp", link_class_name(e.placement.pp.link)}}}};
  // ZeRO-Offload's host side, only where it is asked (offload_cost.hpp).
  if (e.config.spec.zero.offload) {
    doc["memory"]["host_bytes"] = m.host;
    doc["host_memory_capacity_bytes"] = e.host_memory_capacity;
    doc["traffic"]["pcie_bytes"] = e.traffic.pcie_bytes;
  }
  return doc;
}

std::string gb(double bytes) { return fmt::format("{:.1f}", bytes / 1e9); }
std::string gib(double bytes) { return fmt::format("{:.2f}", bytes / (1024.0 * 1024.0 * 1024.0)); }

// "4" or "1-16" (the micro-batch sizes that tie).
std::string size_range(const std::vector<std::int64_t>& sizes) {
  if (sizes.size() == 1) return std::to_string(sizes.front());
  return fmt::format("{}-{}", sizes.front(), sizes.back());
}

std::string row_text(int rank, const StepEstimate& e, const std::vector<std::int64_t>& micro_batch_sizes) {
  const TimeSplit& t = e.time;
  const StepConfig& c = e.config;
  const ParallelLayout& l = c.spec.layout;
  const std::string schedule = l.pp == 1 ? std::string("-")
                               : l.schedule == ScheduleKind::interleaved ? fmt::format("interl.v{}", l.chunks)
                                                                         : std::string(schedule_name(l.schedule));
  return fmt::format(
      "{:>4} {:<9} {:>3} {:>3} {:>5} {:<10} {:>5} {:>4} {:<9} {:>8.4f} {:>10.4g} {:>6.1f} {:>5.1f} {:>7.1f} {:>7} "
      "{:>8.4f} {:>7.4f} {:>7.4f} {:>7.4f} {:>7.4f} {:>7.4f} {:>7} {:>7} {:>7}\n",
      rank, layout_label(c), l.tp, l.pp, l.dp, schedule, size_range(micro_batch_sizes), zero_label(c),
      recompute_name(c.spec.recompute), e.step_seconds, e.tokens_per_second, e.tflops_per_gpu, 100 * e.mfu,
      100 * e.bubble_fraction, gib(e.memory.total()), t.compute, t.tp_comm, t.pp_comm, t.dp_comm, t.bubble,
      t.optimizer, gb(e.traffic.tp_bytes), gb(e.traffic.pp_bytes), gb(e.traffic.dp_bytes));
}

std::string header_text() {
  return fmt::format(
      "{:>4} {:<9} {:>3} {:>3} {:>5} {:<10} {:>5} {:>4} {:<9} {:>8} {:>10} {:>6} {:>5} {:>7} {:>7} "
      "{:>8} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}\n",
      "rank", "TP", "tp", "pp", "dp", "schedule", "mb", "zero", "recompute", "step s", "tokens/s", "TFLOPs", "MFU%",
      "bubble%", "mem GiB", "compute", "tp s", "pp s", "dp s", "bubble", "optim", "tp GB", "pp GB", "dp GB");
}

std::string cluster_line(const Cluster& c) {
  const bool restricted = c.library == CollectiveLibrary::nccl && !c.nccl_algorithms.all();
  return fmt::format("cluster {} ({}; {} GPUs per node, {} collectives{}){}\n", c.name, c.gpu_name, c.gpus_per_node,
                     collective_library_name(c.library),
                     restricted ? ", all-reduce by " + nccl_algorithms_name(c.nccl_algorithms) + " only" : "",
                     c.path.empty() ? "" : " from " + c.path);
}

}  // namespace

std::string estimate_json(const StepEstimate& e, const Cluster& cluster, const StepEstimate* data_sheet_bound) {
  json doc = estimate_object(e);
  doc["cluster"] = cluster.name;
  doc["nccl_algo"] = nccl_algorithms_name(cluster.nccl_algorithms);
  if (data_sheet_bound)
    doc["data_sheet_bound"] = {{"step_s", data_sheet_bound->step_seconds},
                               {"tflops_per_gpu", data_sheet_bound->tflops_per_gpu},
                               {"mfu", data_sheet_bound->mfu}};
  return doc.dump(2) + "\n";
}

std::string estimate_text(const StepEstimate& e, const Cluster& cluster, const StepEstimate* data_sheet_bound) {
  std::ostringstream os;
  os << cluster_line(cluster) << describe(e.config) << ", " << e.microbatches << " micro-batches per replica\n";
  os << fmt::format("step {:.4f} s, {:.4g} tokens/s, {:.1f} TFLOP/s per GPU (recomputation included), MFU {:.1f}%, "
                    "HFU {:.1f}%\n",
                    e.step_seconds, e.tokens_per_second, e.tflops_per_gpu, 100 * e.mfu, 100 * e.hfu);
  const TimeSplit& t = e.time;
  os << fmt::format("time: compute {:.4f} s, tensor-parallel {:.4f} s, pipeline sends {:.4f} s, data-parallel {:.4f} s, "
                    "bubble {:.4f} s ({:.1f}%), optimizer {:.4f} s\n",
                    t.compute, t.tp_comm, t.pp_comm, t.dp_comm, t.bubble, 100 * e.bubble_fraction, t.optimizer);
  if (data_sheet_bound)
    os << fmt::format("data-sheet bound: step {:.4f} s, {:.1f} TFLOP/s per GPU, MFU {:.1f}% (this step with tensor "
                      "cores at peak, HBM at its bandwidth, links at line rate, no latency or launch cost; the "
                      "prediction is {:.0f}% of it)\n",
                      data_sheet_bound->step_seconds, data_sheet_bound->tflops_per_gpu, 100 * data_sheet_bound->mfu,
                      100 * data_sheet_bound->step_seconds / e.step_seconds);
  const ComputeSplit& k = e.compute;
  if (k.gemm_seconds > 0 && k.stream_seconds > 0)
    os << fmt::format("compute (the slowest stage per step): GEMMs and attention {:.4f} s for {:.4g} TFLOP "
                      "({:.1f} TFLOP/s; causal attention's products counted whole), streaming kernels {:.4f} s for "
                      "{:.4g} GB ({:.0f} GB/s)\n",
                      k.gemm_seconds, k.gemm_flops / 1e12, k.gemm_flops / k.gemm_seconds / 1e12, k.stream_seconds,
                      k.stream_bytes / 1e9, k.stream_bytes / k.stream_seconds / 1e9);
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
  if (e.config.spec.zero.offload) {
    const int on_host = gpus_per_host(e.config, cluster);
    os << fmt::format("host memory per node (ZeRO-Offload): {} GB of {} GB{} — {} GB of optimizer state and f32 "
                      "gradients for each of the job's {} {} on a node; PCIe {} GB per GPU per step (the optimizer "
                      "time is the host's update and the new values' copy back)\n",
                      gb(m.host * on_host), gb(e.host_memory_capacity),
                      m.host * on_host > e.host_memory_capacity ? " (DOES NOT FIT)" : "", gb(m.host), on_host,
                      on_host == 1 ? "GPU" : "GPUs", gb(e.traffic.pcie_bytes));
  }
  os << fmt::format("links: tp {}, dp {}, pp {}\n", link_class_name(e.placement.tp.link), link_class_name(e.placement.dp.link),
                    link_class_name(e.placement.pp.link));
  return os.str();
}

std::string plan_json(const PlanRequest& r, const PlanResult& result, const Cluster& cluster, int top) {
  json configs = json::array();
  const std::size_t n = top > 0 ? std::min<std::size_t>(static_cast<std::size_t>(top), result.ranked.size())
                                : result.ranked.size();
  for (std::size_t i = 0; i < n; ++i) configs.push_back(estimate_object(result.ranked[i]));
  // One row per layout (collapse_layouts): the index of its quickest configuration in the full
  // ranking, its label, and the micro-batch sizes that tie.
  json layouts = json::array();
  for (const LayoutRow& row : collapse_layouts(result.ranked)) {
    if (top > 0 && layouts.size() >= static_cast<std::size_t>(top)) break;
    layouts.push_back({{"rank_index", row.index},
                       {"label", layout_label(result.ranked[row.index].config)},
                       {"description", describe(result.ranked[row.index].config)},
                       {"micro_batch_sizes", row.micro_batch_sizes},
                       {"step_s", result.ranked[row.index].step_seconds}});
  }
  const json doc = {{"cluster", cluster.name},
                    {"model", model_json(r.base.spec.model)},
                    {"global_batch", r.base.spec.global_batch},
                    {"gpus", r.gpus},
                    {"dtype", dtype_name(r.base.dtype())},
                    {"considered", result.considered},
                    {"refused", result.refused},
                    {"too_big", result.too_big},
                    {"feasible", result.ranked.size()},
                    {"configs", configs},
                    {"layouts", layouts},
                    {"units", "seconds per step; bytes (memory per GPU, traffic per GPU per step)"}};
  return doc.dump(2) + "\n";
}

std::string plan_text(const PlanRequest& r, const PlanResult& result, const Cluster& cluster, int top) {
  std::ostringstream os;
  os << cluster_line(cluster);
  os << fmt::format("model {}; global batch {} on {} GPUs, {}{}\n", model_text(r.base.spec.model),
                    r.base.spec.global_batch, r.gpus, dtype_name(r.base.dtype()), r.base.dropout() ? ", dropout" : "");
  const std::vector<LayoutRow> layouts = collapse_layouts(result.ranked);
  os << fmt::format("{} configurations fit in {} layouts ({} evaluated, {} over the GPU memory, {} shapes refused by "
                    "the layouts)\n",
                    result.ranked.size(), layouts.size(), result.considered, result.too_big, result.refused);
  if (result.ranked.empty()) return os.str();
  os << "Units: s = seconds per step (the exposed time of each part: compute, tensor-parallel, pipeline sends, "
        "data-parallel, bubble, optimizer); mem GiB = 2^30 bytes per GPU; tp/pp/dp GB = 10^9 logical bytes one GPU "
        "moves per step on that axis (mdtp cost --step-bytes: the exact plan).  One row per layout, at its quickest "
        "micro-batch size; mb lists the sizes that tie.  TFLOPs per GPU count recomputation; zero 2m/3m: gradients "
        "reduce-scattered after every micro-batch, 3k: parameters kept for the step"
     << (r.base.spec.zero.offload ? ", o: the optimizer state and update on the host (ZeRO-Offload; optim is the "
                                    "host's update and the copy back, mem GiB the GPU's alone).\n"
                                  : ".\n")
     << header_text();
  const std::size_t n = top > 0 ? std::min<std::size_t>(static_cast<std::size_t>(top), layouts.size()) : layouts.size();
  for (std::size_t i = 0; i < n; ++i)
    os << row_text(static_cast<int>(i + 1), result.ranked[layouts[i].index], layouts[i].micro_batch_sizes);
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
                    {"micro_batch", r.estimate.config.micro_batch()},
                    {"measured_tflops_per_gpu", r.row.tflops_per_gpu},
                    {"predicted_tflops_per_gpu", r.predicted},
                    {"error", r.error},
                    {"baseline_error", r.baseline_error},
                    {"data_sheet_bound_tflops_per_gpu", r.bound},
                    {"estimate", estimate_object(r.estimate)}});
  // Each model's configurations and their order: what the goal's order condition holds (from five).
  json models = json::array();
  for (const ModelOrder& m : v.models)
    models.push_back({{"layers", m.layers},
                      {"hidden", m.hidden},
                      {"heads", m.heads},
                      {"configurations", m.order.runs},
                      {"spearman", m.order.spearman},
                      {"distinct_pairs", m.order.distinct_pairs},
                      {"distinct_pairs_ordered", m.order.distinct_pairs_ordered}});
  const json doc = {{"table", v.table->key},
                    {"title", v.table->title},
                    {"citation", v.table->citation},
                    {"rule", v.table->rule.text},
                    {"setup_source", v.table->setup_source},
                    {"cluster", cluster.name},
                    {"baseline_tflops_per_gpu", v.baseline_tflops},
                    {"max_error", v.max_error},
                    {"mean_abs_error", v.mean_abs_error},
                    {"spearman", v.across.spearman},
                    {"distinct_pairs", v.across.distinct_pairs},
                    {"distinct_pairs_ordered", v.across.distinct_pairs_ordered},
                    {"models", models},
                    {"baseline_max_error", v.baseline_max_error},
                    {"baseline_mean_abs_error", v.baseline_mean_abs_error},
                    {"goal_misses", goal_misses(v)},
                    {"rows", rows}};
  return doc.dump(2) + "\n";
}

std::string validation_text(const Validation& v, const Cluster& cluster) {
  std::ostringstream os;
  os << fmt::format("{}, predicted from {} (baseline: {:.1f} TFLOP/s for every row)\n", v.table->title,
                    cluster.name, v.baseline_tflops);
  os << fmt::format("source: {}\nrule for what the rows leave out: {}\n", v.table->citation, v.table->rule.text);
  if (!v.table->setup_source.empty()) os << fmt::format("each run's own setup: {}\n", v.table->setup_source);
  os << "\n| params | heads | hidden | layers | TP | PP | GPUs | batch | mb | schedule | measured | predicted | "
        "error | baseline error | of bound | compute | TP comm | PP comm | DP comm | bubble |\n";
  os << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : v.rows) {
    const StepEstimate& e = r.estimate;
    const double s = e.step_seconds;
    const std::string schedule = e.config.spec.layout.pp == 1 ? "-"
                                 : e.config.spec.layout.schedule == ScheduleKind::interleaved
                                     ? fmt::format("interleaved v={}", e.config.spec.layout.chunks)
                                     : std::string(schedule_name(e.config.spec.layout.schedule));
    os << fmt::format(
        "| {}B | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0f} | {:.1f} | {:+.1f}% | {:+.1f}% | {:.0f}% | "
        "{:.1f}% | {:.1f}% | {:.1f}% | {:.1f}% | {:.1f}% |\n",
        r.row.billions, r.row.heads, r.row.hidden, r.row.layers, r.row.tp, r.row.pp, r.row.gpus, r.row.batch,
        e.config.micro_batch(), schedule, r.row.tflops_per_gpu, r.predicted, 100 * r.error, 100 * r.baseline_error,
        100 * r.row.tflops_per_gpu / r.bound, 100 * e.time.compute / s, 100 * e.time.tp_comm / s,
        100 * e.time.pp_comm / s, 100 * e.time.dp_comm / s, 100 * e.time.bubble / s);
  }
  const PredictionGoal goal;  // its bounds as goal_misses holds them, not copied into the text
  os << fmt::format("\nmax |error| {:.1f}% (baseline {:.1f}%), mean |error| {:.1f}% (baseline {:.1f}%)\n",
                    100 * v.max_error, 100 * v.baseline_max_error, 100 * v.mean_abs_error,
                    100 * v.baseline_mean_abs_error);
  os << fmt::format("order across the table's rows (reported; the goal holds the order of one model's "
                    "configurations, below): Spearman of predicted vs measured TFLOP/s {:.2f}, pairs measured more "
                    "than 10% apart predicted in their order: {} of {}\n",
                    v.across.spearman, v.across.distinct_pairs_ordered, v.across.distinct_pairs);
  // Each model measured in more than one configuration, with its order; the goal holds it from five.
  std::vector<std::string> several;
  for (const ModelOrder& m : v.models)
    if (m.order.runs > 1)
      several.push_back(fmt::format("{} in {} configurations: Spearman {:.2f}, {} of {} pairs in order",
                                    model_name(m), m.order.runs, m.order.spearman, m.order.distinct_pairs_ordered,
                                    m.order.distinct_pairs));
  os << "order of each model's configurations: "
     << (several.empty() ? fmt::format("every row is a different model ({} models)", v.models.size())
                         : fmt::format("{}", fmt::join(several, "; ")))
     << "\n";
  // How close each run came to what its hardware allows under the rule (ValidationRow::bound).
  double lowest = std::numeric_limits<double>::infinity(), highest = 0.0;
  std::vector<std::string> above;
  for (const auto& r : v.rows) {
    const double share = r.row.tflops_per_gpu / r.bound;
    lowest = std::min(lowest, share);
    highest = std::max(highest, share);
    if (share > 1.0) above.push_back(fmt::format("{}B", r.row.billions));
  }
  os << fmt::format("measured / data-sheet bound (each row's configuration with tensor cores at peak, HBM at its "
                    "bandwidth, links at line rate, no latency or launch cost): {:.0f}% to {:.0f}%{}\n",
                    100 * lowest, 100 * highest,
                    above.empty() ? std::string()
                                  : fmt::format("; above it, not run as the rule has it: {}", fmt::join(above, ", ")));
  const std::vector<std::string> misses = goal_misses(v, goal);
  os << fmt::format("prediction goal (mean |error| <= {:.0f}%, worst <= {:.0f}%; for a model measured in {} "
                    "configurations or more, Spearman >= {:.1f} over them and every pair of them measured more than "
                    "10% apart in order): ",
                    100 * goal.mean_abs_error, 100 * goal.max_error, goal.order_configurations, goal.spearman)
     << (misses.empty() ? std::string("met") : fmt::format("not met ({})", fmt::join(misses, "; ")))
     << (order_held(v, goal) ? std::string()
                             : fmt::format(" (no model here has {} configurations: the errors are held, the order "
                                           "is not tested by this table)",
                                           goal.order_configurations))
     << "\n";
  return os.str();
}

}  // namespace mdtp::cost
