#include "cost/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "cost/geometry.hpp"
#include "core/error.hpp"

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
    if (call.phase == "grad-sync") continue;
    bus += to_ledger_entry(call).bus_bytes;
    calls += 1.0;
  }
  r.bandwidth = ratio(bus, static_cast<double>(w.rows * w.hidden) * static_cast<double>(dtype_size(w.dtype)));
  r.latency = calls;
  return r;
}

std::string fmt(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

std::string json_number(double v) { return std::isfinite(v) ? fmt("%.17g", v) : "null"; }

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
  auto phase_rank = [](const std::string& phase) { return phase == "forward" ? 0 : phase == "backward" ? 1 : 2; };
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
    os << "  " << link_class_name(link) << " alpha=" << fmt("%.3g", p.alpha) << " s beta=" << fmt("%.3g", p.beta)
       << " s/B (" << fmt("%.3g", p.beta > 0 ? 1e-9 / p.beta : 0.0) << " GB/s)";
  }
  if (!r.model.calibration.fits.empty()) os << "  + " << r.model.calibration.fits.size() << " calibrated op fits";

  os << "\n\ncommunication per rank (every rank issues the same calls; times are sums, no overlap)\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-10s %-17s %-15s %3s %-10s %6s %14s %16s %11s  %s\n", "phase", "group", "op", "n",
                "link", "calls", "bytes", "bus bytes", "seconds", "algorithm");
  os << line;
  for (const auto& row : r.comm) {
    std::snprintf(line, sizeof line, "%-10s %-17s %-15s %3d %-10s %6lld %14lld %16.1f %11.4e  %s\n",
                  row.key.phase.c_str(), row.key.group.c_str(), collective_name(row.key.op), row.group_size,
                  link_class_name(row.link), static_cast<long long>(row.calls), static_cast<long long>(row.logical_bytes),
                  row.bus_bytes, row.seconds, row.algorithms.c_str());
    os << line;
  }
  if (r.comm.empty()) os << "  (no collectives)\n";
  os << "total: forward " << fmt("%.4e", r.comm_seconds("forward")) << " s, backward "
     << fmt("%.4e", r.comm_seconds("backward")) << " s, grad-sync " << fmt("%.4e", r.comm_seconds("grad-sync"))
     << " s, all " << fmt("%.4e", r.comm_seconds()) << " s\n";

  os << "\ncompute per rank (GEMMs only; one layer listed, m x n x k):\n";
  for (const auto& g : r.gemms)
    os << "  " << g.phase << " " << g.layer << " " << g.what << " " << g.m << "x" << g.n << "x" << g.k
       << (g.count > 1 ? " (x" + std::to_string(g.count) + ")" : "") << "\n";
  if (r.gemms.empty()) os << "  (no GEMMs)\n";
  os << "total: " << fmt("%.4e", r.flops) << " flop";
  if (!r.gemms.empty())
    os << " at " << fmt("%.4g", r.model.gemm_rate(w.dtype) / 1e9) << " GFLOP/s = " << fmt("%.4e", r.compute_seconds) << " s";
  os << "\n";

  const MemoryEstimate& m = r.memory;
  os << "\nmemory per rank (bytes): parameters " << m.parameter_bytes << ", gradients " << m.gradient_bytes
     << ", optimizer " << m.optimizer_bytes << ", activations kept " << m.activation_bytes << ", total " << m.total()
     << "\n  kept for backward (one layer):";
  for (const auto& item : m.kept) os << " [" << item.name << " " << item.bytes << "]";
  os << "\n  output shard " << m.output_bytes << " (not kept)\n";

  const PublishedCosts& p = r.published;
  const ExactRatios& e = r.exact;
  os << "\nper-layer costs, forward+backward (one layer)\n";
  std::snprintf(line, sizeof line, "%-46s %-14s %-14s %-14s %-22s %s\n", "", "compute", "param mem", "activation mem",
                "bandwidth", "latency");
  os << line;
  auto cell = [](const std::string& formula, double v) { return formula + "=" + fmt("%.4g", v); };
  std::snprintf(line, sizeof line, "%-46s %-14s %-14s %-14s %-22s %s\n", kPublishedLabel,
                cell(p.compute_formula, p.compute).c_str(), cell(p.parameter_formula, p.parameter_memory).c_str(),
                cell(p.activation_formula, p.activation_memory).c_str(), cell(p.bandwidth_formula, p.bandwidth).c_str(),
                cell(p.latency_formula, p.latency).c_str());
  os << line;
  std::snprintf(line, sizeof line, "%-46s %-14s %-14s %-14s %-22s %s\n", "exact (fraction of serial; bus/[B,H]; calls)",
                fmt("%.4g", e.compute).c_str(), fmt("%.4g", e.parameter_memory).c_str(),
                fmt("%.4g", e.activation_memory).c_str(), fmt("%.4g", e.bandwidth).c_str(), fmt("%.0f", e.latency).c_str());
  os << line;
  os << "  published row: " << p.row << (p.note.empty() ? "" : " (" + p.note + ")") << "\n";
  return os.str();
}

std::string report_json(const CostReport& r) {
  const Workload& w = r.workload;
  const Topology topology(w.mesh);
  std::ostringstream os;
  os << "{\n  \"workload\": {\"mode\": " << json_string(tp_mode_name(w.mode)) << ", \"layer\": " << json_string(w.layer)
     << ", \"layers\": " << r.layers << ", \"rows\": " << w.rows << ", \"hidden\": " << w.hidden
     << ", \"ffn_hidden\": " << w.ffn_hidden << ", \"dtype\": " << json_string(dtype_name(w.dtype))
     << ", \"keep_gathered_3d\": " << (w.options.keep_gathered_3d ? "true" : "false")
     << ", \"data_parallel_group\": " << json_string(w.data_parallel_group) << "},\n";
  os << "  \"mesh\": {\"world\": " << topology.world() << ", \"tp\": " << topology.tp() << ", \"pp\": " << topology.pp()
     << ", \"dp\": " << topology.dp() << ", \"cp\": " << topology.cp() << ", \"tp_mode\": " << json_string(tp_mode_name(w.mesh.tp_mode))
     << ", \"tp_depth\": " << w.mesh.tp_depth << ", \"ranks_per_node\": " << topology.ranks_per_node() << "},\n";
  os << "  \"links\": {\"source\": " << json_string(r.link_source);
  for (LinkClass link : {LinkClass::intra_node, LinkClass::inter_node}) {
    const LinkParams p = r.model.link(link);
    os << ", " << json_string(link_class_name(link)) << ": {\"alpha\": " << json_number(p.alpha)
       << ", \"beta\": " << json_number(p.beta) << "}";
  }
  os << ", \"calibrated_fits\": " << r.model.calibration.fits.size() << "},\n  \"communication\": [";
  for (std::size_t i = 0; i < r.comm.size(); ++i) {
    const auto& c = r.comm[i];
    os << (i ? ",\n    " : "\n    ") << "{\"phase\": " << json_string(c.key.phase) << ", \"group\": "
       << json_string(c.key.group) << ", \"op\": " << json_string(collective_name(c.key.op))
       << ", \"group_size\": " << c.group_size << ", \"link\": " << json_string(link_class_name(c.link))
       << ", \"calls\": " << c.calls << ", \"logical_bytes\": " << c.logical_bytes
       << ", \"bus_bytes\": " << json_number(c.bus_bytes) << ", \"seconds\": " << json_number(c.seconds)
       << ", \"algorithms\": " << json_string(c.algorithms) << "}";
  }
  os << "\n  ],\n  \"communication_seconds\": {\"forward\": " << json_number(r.comm_seconds("forward"))
     << ", \"backward\": " << json_number(r.comm_seconds("backward")) << ", \"grad-sync\": "
     << json_number(r.comm_seconds("grad-sync")) << ", \"total\": " << json_number(r.comm_seconds()) << "},\n";
  os << "  \"compute\": {\"flops\": " << json_number(r.flops) << ", \"seconds\": " << json_number(r.compute_seconds)
     << ", \"gemms_per_layer\": [";
  for (std::size_t i = 0; i < r.gemms.size(); ++i) {
    const auto& g = r.gemms[i];
    os << (i ? ", " : "") << "{\"phase\": " << json_string(g.phase) << ", \"layer\": " << json_string(g.layer)
       << ", \"what\": " << json_string(g.what) << ", \"m\": " << g.m << ", \"n\": " << g.n << ", \"k\": " << g.k
       << ", \"count\": " << g.count << "}";
  }
  const MemoryEstimate& m = r.memory;
  os << "]},\n  \"memory_bytes\": {\"parameters\": " << m.parameter_bytes << ", \"gradients\": " << m.gradient_bytes
     << ", \"optimizer\": " << m.optimizer_bytes << ", \"activations_kept\": " << m.activation_bytes
     << ", \"output\": " << m.output_bytes << ", \"total\": " << m.total() << ", \"kept_per_layer\": {";
  for (std::size_t i = 0; i < m.kept.size(); ++i)
    os << (i ? ", " : "") << json_string(m.kept[i].name) << ": " << m.kept[i].bytes;
  const PublishedCosts& p = r.published;
  const ExactRatios& e = r.exact;
  os << "}},\n  \"published\": {\"label\": " << json_string(kPublishedLabel) << ", \"row\": " << json_string(p.row)
     << ", \"note\": " << json_string(p.note) << ", \"compute\": " << json_number(p.compute)
     << ", \"parameter_memory\": " << json_number(p.parameter_memory) << ", \"activation_memory\": "
     << json_number(p.activation_memory) << ", \"bandwidth\": " << json_number(p.bandwidth)
     << ", \"latency\": " << json_number(p.latency) << ", \"formulas\": [" << json_string(p.compute_formula) << ", "
     << json_string(p.parameter_formula) << ", " << json_string(p.activation_formula) << ", "
     << json_string(p.bandwidth_formula) << ", " << json_string(p.latency_formula) << "]},\n";
  os << "  \"exact\": {\"compute\": " << json_number(e.compute) << ", \"parameter_memory\": "
     << json_number(e.parameter_memory) << ", \"activation_memory\": " << json_number(e.activation_memory)
     << ", \"bandwidth_bus_bytes_per_full_activation\": " << json_number(e.bandwidth)
     << ", \"latency_calls\": " << json_number(e.latency) << "}\n}\n";
  return os.str();
}

}  // namespace mdtp::cost
