#include "cost/report.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "cost/geometry.hpp"
#include "core/error.hpp"
#include "spec/names.hpp"

namespace mdtp::cost {

namespace {

double ratio(double part, double whole) { return whole == 0.0 ? 0.0 : part / whole; }

Workload serial_of(const Workload& w) {
  Workload s = w;
  s.mode = TpMode::none;
  s.mesh = MeshConfig{};
  s.options = TpOptions{};
  s.data_parallel_group.clear();
  return s;
}

ExactRatios exact_ratios(const Workload& w, const std::vector<PlannedCall>& one_layer) {
  const Workload serial = serial_of(w);
  ExactRatios r;
  r.compute = ratio(total_flops(plan_gemms(w)), total_flops(plan_gemms(serial)));
  const MemoryEstimate mine = estimate_memory(w), base = estimate_memory(serial);
  r.parameter_memory = ratio(static_cast<double>(mine.parameter_elements), static_cast<double>(base.parameter_elements));
  r.activation_memory = ratio(static_cast<double>(mine.activation_bytes), static_cast<double>(base.activation_bytes));
  double bus = 0.0, calls = 0.0;
  for (const auto& call : one_layer) {
    if (call.phase == phase::grad_sync) continue;
    bus += to_ledger_entry(call).bus_bytes;
    calls += 1.0;
  }
  r.bandwidth = ratio(bus, static_cast<double>(w.rows * w.hidden) * static_cast<double>(dtype_size(w.dtype)));
  r.latency = calls;
  return r;
}

}  // namespace

double CostReport::comm_seconds(const std::string& phase) const {
  double sum = 0.0;
  for (const auto& row : comm)
    if (phase.empty() || row.key.phase == phase) sum += row.seconds;
  return sum;
}

CostReport build_cost_report(const Workload& workload, const TimeModel& model, int layers,
                             double optimizer_bytes_per_param, std::string link_source) {
  require(layers >= 1, "a report covers at least one layer; got layers=", layers);
  CostReport r;
  r.workload = workload;
  r.layers = layers;
  r.link_source = std::move(link_source);
  r.model = model;
  const std::vector<PlannedCall> one = plan_step(workload);
  const Geometry geometry(workload);
  r.comm = predict_plan(repeat_plan(one, layers), geometry.topology(), model);
  // Rows in the order a step runs them, not the ledger key's alphabetical phase order.
  auto phase_rank = [](const std::string& name) {
    return name == phase::forward ? 0 : name == phase::backward ? 1 : 2;
  };
  std::stable_sort(r.comm.begin(), r.comm.end(), [&](const PredictedTotals& a, const PredictedTotals& b) {
    return phase_rank(a.key.phase) < phase_rank(b.key.phase);
  });
  r.gemms = plan_gemms(workload);
  r.flops = total_flops(r.gemms) * layers;
  r.compute_seconds = r.gemms.empty() ? 0.0 : r.flops / model.gemm_rate(workload.dtype);
  r.memory = estimate_memory(workload, optimizer_bytes_per_param);
  r.memory.parameter_elements *= layers;
  r.memory.parameter_bytes *= layers;
  r.memory.gradient_bytes *= layers;
  r.memory.optimizer_bytes *= layers;
  r.memory.activation_bytes *= layers;
  const TpGrid& grid = geometry.topology().tp_grid();
  r.published = published_costs(workload.mode, workload.mesh.tp, grid.depth());
  r.exact = exact_ratios(workload, one);
  return r;
}

std::string report_text(const CostReport& r) {
  const Workload& w = r.workload;
  const Topology topology(w.mesh);
  std::ostringstream os;
  os << "mdtp cost: mode " << w.mode << ", layer " << w.layer << (r.layers > 1 ? " x" + std::to_string(r.layers) : "")
     << ", rows B=" << w.rows << ", hidden=" << w.hidden;
  if (w.layer != "layernorm") os << ", ffn=" << w.ffn_hidden;
  os << ", dtype " << dtype_name(w.dtype);
  if (w.mode == TpMode::d3) os << (w.options.keep_gathered_3d ? ", keep gathered X and W" : ", keep shards only");
  os << "\nmesh: world=" << topology.world() << " tp=" << topology.tp() << " pp=" << topology.pp()
     << " dp=" << topology.dp() << " cp=" << topology.cp();
  if (topology.ranks_per_node() > 0) os << "  ranks/node=" << topology.ranks_per_node();
  os << (w.data_parallel_group.empty() ? "  (no data-parallel gradient sum)" : "  grad-sync over " + w.data_parallel_group)
     << "\nlinks (" << r.link_source << "):";
  for (LinkClass link : {LinkClass::intra_node, LinkClass::inter_node}) {
    const LinkParams p = r.model.link(link);
    os << fmt::format("  {} alpha={:.3g} s beta={:.3g} s/B ({:.3g} GB/s)", link_class_name(link), p.alpha, p.beta,
                      p.beta > 0 ? 1e-9 / p.beta : 0.0);
  }
  if (!r.model.calibration.fits.empty()) os << "  + " << r.model.calibration.fits.size() << " calibrated op fits";

  os << "\n\ncommunication per rank (every rank issues the same calls; times are sums, no overlap)\n";
  os << fmt::format("{:<10} {:<17} {:<15} {:>3} {:<10} {:>6} {:>14} {:>16} {:>11}  {}\n", "phase", "group", "op", "n",
                    "link", "calls", "bytes", "bus bytes", "seconds", "algorithm");
  for (const auto& row : r.comm)
    os << fmt::format("{:<10} {:<17} {:<15} {:>3} {:<10} {:>6} {:>14} {:>16.1f} {:>11.4e}  {}\n", row.key.phase,
                      row.key.group, collective_name(row.key.op), row.group_size, link_class_name(row.link), row.calls,
                      row.logical_bytes, row.bus_bytes, row.seconds, row.algorithms);
  if (r.comm.empty()) os << "  (no collectives)\n";
  os << fmt::format("total: forward {:.4e} s, backward {:.4e} s, grad-sync {:.4e} s, all {:.4e} s\n",
                    r.comm_seconds(phase::forward), r.comm_seconds(phase::backward), r.comm_seconds(phase::grad_sync),
                    r.comm_seconds());

  os << "\ncompute per rank (GEMMs only; one layer listed, m x n x k):\n";
  for (const auto& g : r.gemms)
    os << "  " << g.phase << " " << g.layer << " " << g.what << " " << g.m << "x" << g.n << "x" << g.k
       << (g.count > 1 ? " (x" + std::to_string(g.count) + ")" : "") << "\n";
  if (r.gemms.empty()) os << "  (no GEMMs)\n";
  os << fmt::format("total: {:.4e} flop", r.flops);
  if (!r.gemms.empty())
    os << fmt::format(" at {:.4g} GFLOP/s = {:.4e} s", r.model.gemm_rate(w.dtype) / 1e9, r.compute_seconds);
  os << "\n";

  const MemoryEstimate& m = r.memory;
  os << "\nmemory per rank (bytes): parameters " << m.parameter_bytes << ", gradients " << m.gradient_bytes
     << ", optimizer " << m.optimizer_bytes << ", activations kept " << m.activation_bytes << ", total " << m.total()
     << "\n  kept for backward (one layer):";
  for (const auto& item : m.kept) os << " [" << item.name << " " << item.bytes << "]";
  os << "\n  output shard " << m.output_bytes << " (not kept)\n";

  const PublishedCosts& p = r.published;
  const ExactRatios& e = r.exact;
  constexpr const char* kRow = "{:<46} {:<14} {:<14} {:<14} {:<22} {}\n";
  os << "\nper-layer costs, forward+backward (one layer)\n";
  os << fmt::format(kRow, "", "compute", "param mem", "activation mem", "bandwidth", "latency");
  auto cell = [](const std::string& formula, double v) { return fmt::format("{}={:.4g}", formula, v); };
  os << fmt::format(kRow, kPublishedLabel, cell(p.compute_formula, p.compute), cell(p.parameter_formula, p.parameter_memory),
                    cell(p.activation_formula, p.activation_memory), cell(p.bandwidth_formula, p.bandwidth),
                    cell(p.latency_formula, p.latency));
  os << fmt::format(kRow, "exact (fraction of serial; bus/[B,H]; calls)", fmt::format("{:.4g}", e.compute),
                    fmt::format("{:.4g}", e.parameter_memory), fmt::format("{:.4g}", e.activation_memory),
                    fmt::format("{:.4g}", e.bandwidth), fmt::format("{:.0f}", e.latency));
  os << "  published row: " << p.row << (p.note.empty() ? "" : " (" + p.note + ")") << "\n";
  return os.str();
}

// Keys and nesting are what `mdtp cost --json` has always written (tools read them); numbers that
// are not finite are written as null.
std::string report_json(const CostReport& r) {
  using Json = nlohmann::ordered_json;
  const Workload& w = r.workload;
  const Topology topology(w.mesh);
  Json doc;
  doc["workload"] = {{"mode", tp_mode_name(w.mode)},
                     {"layer", w.layer},
                     {"layers", r.layers},
                     {"rows", w.rows},
                     {"hidden", w.hidden},
                     {"ffn_hidden", w.ffn_hidden},
                     {"dtype", dtype_name(w.dtype)},
                     {"keep_gathered_3d", w.options.keep_gathered_3d},
                     {"data_parallel_group", w.data_parallel_group}};
  doc["mesh"] = {{"world", topology.world()},
                 {"tp", topology.tp()},
                 {"pp", topology.pp()},
                 {"dp", topology.dp()},
                 {"cp", topology.cp()},
                 {"tp_mode", tp_mode_name(w.mesh.tp_mode)},
                 {"tp_depth", w.mesh.tp_depth},
                 {"ranks_per_node", topology.ranks_per_node()}};
  Json& links = doc["links"] = {{"source", r.link_source}};
  for (LinkClass link : {LinkClass::intra_node, LinkClass::inter_node}) {
    const LinkParams p = r.model.link(link);
    links[link_class_name(link)] = {{"alpha", p.alpha}, {"beta", p.beta}};
  }
  links["calibrated_fits"] = r.model.calibration.fits.size();
  Json& comm = doc["communication"] = Json::array();
  for (const auto& c : r.comm)
    comm.push_back({{"phase", c.key.phase},
                    {"group", c.key.group},
                    {"op", collective_name(c.key.op)},
                    {"group_size", c.group_size},
                    {"link", link_class_name(c.link)},
                    {"calls", c.calls},
                    {"logical_bytes", c.logical_bytes},
                    {"bus_bytes", c.bus_bytes},
                    {"seconds", c.seconds},
                    {"algorithms", c.algorithms}});
  doc["communication_seconds"] = {{phase::forward, r.comm_seconds(phase::forward)},
                                  {phase::backward, r.comm_seconds(phase::backward)},
                                  {phase::grad_sync, r.comm_seconds(phase::grad_sync)},
                                  {"total", r.comm_seconds()}};
  Json gemms = Json::array();
  for (const auto& g : r.gemms)
    gemms.push_back({{"phase", g.phase}, {"layer", g.layer}, {"what", g.what}, {"m", g.m}, {"n", g.n}, {"k", g.k},
                     {"count", g.count}});
  doc["compute"] = {{"flops", r.flops}, {"seconds", r.compute_seconds}, {"gemms_per_layer", std::move(gemms)}};
  const MemoryEstimate& m = r.memory;
  Json kept = Json::object();
  for (const auto& item : m.kept) kept[item.name] = item.bytes;
  doc["memory_bytes"] = {{"parameters", m.parameter_bytes},
                         {"gradients", m.gradient_bytes},
                         {"optimizer", m.optimizer_bytes},
                         {"activations_kept", m.activation_bytes},
                         {"output", m.output_bytes},
                         {"total", m.total()},
                         {"kept_per_layer", std::move(kept)}};
  const PublishedCosts& p = r.published;
  doc["published"] = {{"label", kPublishedLabel},
                      {"row", p.row},
                      {"note", p.note},
                      {"compute", p.compute},
                      {"parameter_memory", p.parameter_memory},
                      {"activation_memory", p.activation_memory},
                      {"bandwidth", p.bandwidth},
                      {"latency", p.latency},
                      {"formulas", {p.compute_formula, p.parameter_formula, p.activation_formula, p.bandwidth_formula,
                                    p.latency_formula}}};
  const ExactRatios& e = r.exact;
  doc["exact"] = {{"compute", e.compute},
                  {"parameter_memory", e.parameter_memory},
                  {"activation_memory", e.activation_memory},
                  {"bandwidth_bus_bytes_per_full_activation", e.bandwidth},
                  {"latency_calls", e.latency}};
  return doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::string zero_text(const ZeroPaperInputs& c, const std::vector<ZeroStageCost>& stages) {
  auto gb = [](double bytes) { return fmt::format("{:.1f}", bytes / 1e9); };
  std::string out = fmt::format(
      "ZeRO over N_d={} ranks, Psi={} parameters, bytes per parameter {} / gradient {} / optimizer K={} (1 GB = 1e9 B)\n",
      c.data_parallel, c.parameters, c.param_bytes, c.grad_bytes, c.optimizer_bytes);
  constexpr const char* kRow = "{:<6} {:<18} {:>14} {:<26} {:>12} {:>12}  {}\n";
  out += fmt::format(kRow, "stage", "partitions", "memory/rank GB", "memory formula", "comm (Psi)", "comm GB",
                     "communication per step");
  for (const auto& s : stages)
    out += fmt::format(kRow, s.stage, s.name, gb(s.memory_bytes), s.memory_formula,
                       fmt::format("{:.0f}", s.comm_elements / c.parameters), gb(s.comm_bytes), s.comm_formula);
  return out;
}

std::string zero_json(const ZeroPaperInputs& c, const std::vector<ZeroStageCost>& stages) {
  using Json = nlohmann::ordered_json;
  Json rows = Json::array();
  for (const auto& s : stages)
    rows.push_back({{"stage", s.stage},
                    {"name", s.name},
                    {"memory_bytes", s.memory_bytes},
                    {"comm_elements", s.comm_elements},
                    {"comm_bytes", s.comm_bytes}});
  const Json doc = {{"parameters", c.parameters},   {"dp", c.data_parallel},
                    {"param_bytes", c.param_bytes}, {"grad_bytes", c.grad_bytes},
                    {"optimizer_bytes", c.optimizer_bytes}, {"stages", std::move(rows)}};
  return doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

namespace {

const char* bubble_formula(const PipelineConfig& c) {
  return c.schedule == ScheduleKind::interleaved ? "(p-1)/(v*m)" : "(p-1)/m";
}

}  // namespace

std::string pipeline_text(const std::vector<PipelineConfig>& schedules) {
  require(!schedules.empty(), "pipeline_text needs at least one schedule");
  std::string out = fmt::format("pipeline: p={} stages, m={} micro-batches\n", schedules.front().stages,
                                schedules.front().microbatches);
  for (const auto& c : schedules)
    out += fmt::format("  {:<12} v={}  bubble {} = {:.4f} of ideal compute, {:.4f} of the step; peak in flight per "
                       "stage: {}\n",
                       schedule_name(c.schedule), c.chunks, bubble_formula(c), bubble_over_ideal(c),
                       bubble_fraction_of_total(c), fmt::join(peak_in_flight(c), ", "));
  return out;
}

std::string pipeline_json(const std::vector<PipelineConfig>& schedules) {
  using Json = nlohmann::ordered_json;
  require(!schedules.empty(), "pipeline_json needs at least one schedule");
  Json rows = Json::array();
  for (const auto& c : schedules)
    rows.push_back({{"schedule", schedule_name(c.schedule)},
                    {"chunks", c.chunks},
                    {"bubble_over_ideal", bubble_over_ideal(c)},
                    {"bubble_fraction_of_total", bubble_fraction_of_total(c)},
                    {"peak_in_flight_per_stage", peak_in_flight(c)}});
  const Json doc = {{"pp", schedules.front().stages},
                    {"microbatches", schedules.front().microbatches},
                    {"schedules", std::move(rows)}};
  return doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace mdtp::cost
