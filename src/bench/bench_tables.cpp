#include "bench/bench_tables.hpp"

#include <fmt/format.h>

#include <set>

#include "bench/mode_mesh.hpp"

namespace mdtp::bench {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// Averages of the per-rep rows of one phase: max over ranks, mean over reps.
struct PhaseAverage {
  double wall = 0, comm = 0, compute = 0, exposed = 0, wall_mean = 0, comm_mean = 0, compute_mean = 0, wait = 0;
};
PhaseAverage average_phase(const LayerMeasurement& m, const std::string& phase) {
  PhaseAverage a;
  int n = 0;
  for (const auto& s : m.steps) {
    if (s.phase != phase) continue;
    a.wall += s.wall.max, a.comm += s.comm.max, a.compute += s.compute.max, a.exposed += s.exposed.max;
    a.wall_mean += s.wall.mean, a.comm_mean += s.comm.mean, a.compute_mean += s.compute.mean;
    a.wait += s.wait.max;
    ++n;
  }
  if (n > 0) {
    a.wall /= n, a.comm /= n, a.compute /= n, a.exposed /= n, a.wall_mean /= n, a.comm_mean /= n, a.compute_mean /= n;
    a.wait /= n;
  }
  return a;
}

Table comm_table(const LayerMeasurement& m, const Prediction& p) {
  Table t;
  t.text("phase").text("group").text("op").integer("group_size").text("link").text("algorithms");
  t.real("calls_mean").real("calls_max").integer("calls_model");
  t.real("bytes_mean").real("bytes_max").integer("bytes_model").real("bytes_ratio");
  t.real("bus_bytes_mean").real("bus_bytes_model");
  t.real("seconds_mean").real("seconds_max").real("seconds_model").real("time_ratio").integer("bytes_match");
  t.real("wait_mean").real("wait_max").real("synchronised_calls");
  std::map<LedgerKey, const LedgerStat*> measured;
  for (const auto& s : m.comm) measured[s.key] = &s;
  std::set<LedgerKey> keys;
  for (const auto& [k, v] : measured) keys.insert(k);
  for (const auto& [k, v] : p.comm) keys.insert(k);
  const double reps = m.settings.reps;
  for (const auto& key : keys) {
    const LedgerStat* s = measured.count(key) ? measured.at(key) : nullptr;
    const PredictedComm model = p.comm.count(key) ? p.comm.at(key) : PredictedComm{};
    const auto per_step = [&](const MeanMax& v) { return MeanMax{v.mean / reps, v.max / reps}; };
    const MeanMax calls = s ? per_step(s->calls) : MeanMax{};
    const MeanMax bytes = s ? per_step(s->logical_bytes) : MeanMax{};
    const MeanMax bus = s ? per_step(s->bus_bytes) : MeanMax{};
    const MeanMax secs = s ? per_step(s->seconds) : MeanMax{};
    const MeanMax wait = s ? per_step(s->wait_seconds) : MeanMax{};
    const MeanMax synchronised = s ? per_step(s->synchronised_calls) : MeanMax{};
    const auto model_bytes = static_cast<double>(model.logical_bytes);
    const bool match = bytes.mean == model_bytes && bytes.max == model_bytes &&
                       calls.max == static_cast<double>(model.calls) && calls.mean == calls.max;
    t.row()(key.phase)(key.group)(collective_name(key.op))(s ? s->group_size : model.group_size)(model.link)(model.algorithms)(
        calls.mean)(calls.max)(model.calls)(bytes.mean)(bytes.max)(model.logical_bytes)(
        model_bytes > 0 ? bytes.mean / model_bytes : 0.0)(bus.mean)(model.bus_bytes)(secs.mean)(secs.max)(
        model.seconds)(model.seconds > 0 ? secs.max / model.seconds : 0.0)(match ? 1 : 0)(wait.mean)(wait.max)(
        synchronised.mean);
  }
  return t;
}

Table steps_table(const LayerMeasurement& m) {
  Table t;
  t.integer("rep").text("phase");
  for (const char* f : {"wall", "comm", "compute", "gemm", "exposed", "wait"})
    t.real(std::string(f) + "_mean").real(std::string(f) + "_max");
  for (const auto& s : m.steps)
    t.row()(s.rep)(s.phase)(s.wall.mean)(s.wall.max)(s.comm.mean)(s.comm.max)(s.compute.mean)(s.compute.max)(
        s.gemm.mean)(s.gemm.max)(s.exposed.mean)(s.exposed.max)(s.wait.mean)(s.wait.max);
  return t;
}

Table phases_table(const LayerMeasurement& m, const Prediction& p) {
  Table t;
  t.text("phase").real("wall_s").real("comm_s").real("compute_s").real("exposed_s").real("wall_mean_s").real("comm_mean_s");
  t.real("compute_mean_s").real("comm_model_s").real("compute_model_s").real("total_model_s").real("wait_s");
  std::vector<std::string> phases = step_phases();
  phases.push_back("step");
  for (const auto& phase : phases) {
    const PhaseAverage a = average_phase(m, phase);
    const bool step = phase == "step";
    const double comm_model = p.comm_seconds(step ? "" : phase);
    const double compute_model = step ? p.compute_total()
                                      : (p.compute_seconds.count(phase) ? p.compute_seconds.at(phase) : 0.0);
    t.row()(phase)(a.wall)(a.comm)(a.compute)(a.exposed)(a.wall_mean)(a.comm_mean)(a.compute_mean)(comm_model)(compute_model)(
        comm_model + compute_model)(a.wait);
  }
  return t;
}

Table memory_table(const LayerMeasurement& m, const Prediction& p) {
  Table t;
  t.text("category").real("after_setup_mean").real("after_setup_max").real("peak_mean").real("peak_max");
  t.real("model_bytes");
  for (const auto& s : m.memory) {
    const double model = p.memory_bytes.count(s.category) ? p.memory_bytes.at(s.category) : 0.0;
    t.row()(s.category)(s.after_setup.mean)(s.after_setup.max)(s.peak.mean)(s.peak.max)(model);
  }
  return t;
}

Table check_table(const LayerMeasurement& m) {
  Table t;
  t.text("tensor").real("relative_error").real("tolerance").integer("passed");
  for (const auto& e : m.check.errors)
    t.row()(e.tensor)(e.relative_error)(m.check.tolerance)(e.relative_error <= m.check.tolerance ? 1 : 0);
  return t;
}

std::string check_verdict(const LayerMeasurement& m) {
  if (!m.check.ran) return "skipped";
  return m.check.passed ? "passed" : "FAILED";
}

Table summary_table(const LayerMeasurement& m, const BenchSummary& s) {
  const cost::Workload& w = m.workload;
  Topology topology(w.mesh);
  Table t;
  t.text("mode").text("mesh").text("layer").integer("world").integer("tp").integer("dp").integer("depth");
  t.integer("rows").integer("global_rows").integer("hidden").integer("ffn_hidden").text("dtype");
  t.real("bytes_measured").real("bytes_model").real("bytes_ratio").integer("bytes_match");
  t.real("comm_s").real("comm_model_s").real("comm_ratio").real("compute_s").real("compute_model_s");
  t.real("step_s").real("step_model_s").real("peak_bytes").real("peak_model_bytes").text("check");
  t.real("check_error").real("oversubscription").real("wait_s").integer("sync_timing");
  t.row()(std::string(tp_mode_name(w.mode)))(describe_mesh(w.mode, w.mesh))(w.layer)(w.mesh.world)(w.mesh.tp)(topology.dp())(w.mesh.tp_depth)(
      w.rows)(w.rows * topology.dp())(w.hidden)(w.ffn_hidden)(dtype_name(w.dtype))(s.bytes_measured)(s.bytes_model)(
      s.bytes_model > 0 ? s.bytes_measured / s.bytes_model : (s.bytes_measured == 0 ? 1.0 : 0.0))(
      s.bytes_match ? 1 : 0)(s.comm_measured)(s.comm_model)(s.comm_model > 0 ? s.comm_measured / s.comm_model : 0.0)(
      s.compute_measured)(s.compute_model)(s.step_measured)(s.step_model)(s.peak_bytes)(s.peak_model_bytes)(
      check_verdict(m))(m.check.worst())(m.oversubscription)(s.wait_measured)(m.settings.sync_timing ? 1 : 0);
  return t;
}

}  // namespace

double Prediction::comm_seconds(const std::string& phase) const {
  double total = 0.0;
  for (const auto& [key, c] : comm)
    if (phase.empty() || key.phase == phase) total += c.seconds;
  return total;
}

double Prediction::compute_total() const {
  double total = 0.0;
  for (const auto& [phase, seconds] : compute_seconds) total += seconds;
  return total;
}

BenchSummary summarize(const LayerMeasurement& m, const Prediction& p) {
  BenchSummary s;
  const Table comm = comm_table(m, p);
  const auto& measured = std::get<std::vector<double>>(comm.column("bytes_mean"));
  const auto& model = std::get<std::vector<std::int64_t>>(comm.column("bytes_model"));
  const auto& match = std::get<std::vector<std::int64_t>>(comm.column("bytes_match"));
  for (std::size_t r = 0; r < comm.rows(); ++r) {
    s.bytes_measured += measured[r];
    s.bytes_model += static_cast<double>(model[r]);
    s.bytes_match = s.bytes_match && match[r] == 1;
  }
  const PhaseAverage step = average_phase(m, "step");
  s.comm_measured = step.comm;
  s.wait_measured = step.wait;
  s.compute_measured = step.compute;
  s.step_measured = step.wall;
  s.comm_model = p.comm_seconds();
  s.compute_model = p.compute_total();
  s.step_model = s.comm_model + s.compute_model;
  for (const auto& mem : m.memory)
    if (mem.category == "total") s.peak_bytes = mem.peak.max;
  s.peak_model_bytes = p.memory_bytes.count("total") ? p.memory_bytes.at("total") : 0.0;
  return s;
}

std::map<std::string, Table> bench_tables(const LayerMeasurement& m, const Prediction& p, const BenchSummary& s) {
  return {{"comm", comm_table(m, p)},       {"steps", steps_table(m)},      {"phases", phases_table(m, p)},
          {"memory", memory_table(m, p)},   {"check", check_table(m)},      {"summary", summary_table(m, s)}};
}

void add_bench_attributes(Attributes& a, const LayerMeasurement& m, const BenchSummary& s) {
  const cost::Workload& w = m.workload;
  a["layer"] = w.layer;
  a["rows"] = w.rows;  // per data-parallel replica (cost::Workload::rows)
  a["global_rows"] = w.rows * Topology(w.mesh).dp();
  a["data_parallel_group"] = w.data_parallel_group;
  a["hidden"] = w.hidden;
  a["ffn_hidden"] = w.ffn_hidden;
  a["mesh_description"] = describe_mesh(w.mode, w.mesh);
  a["keep_gathered_3d"] = static_cast<std::int64_t>(w.options.keep_gathered_3d ? 1 : 0);
  a["warmup"] = static_cast<std::int64_t>(m.settings.warmup);
  a["reps"] = static_cast<std::int64_t>(m.settings.reps);
  a["seed"] = static_cast<std::int64_t>(m.settings.seed);
  a["input_seed"] = static_cast<std::int64_t>(m.settings.input_seed);
  a["check"] = check_verdict(m);
  a["check_error"] = m.check.worst();
  a["repeat_deviation"] = m.repeat_deviation;
  a["bytes_match"] = static_cast<std::int64_t>(s.bytes_match ? 1 : 0);
  a["sync_timing"] = static_cast<std::int64_t>(m.settings.sync_timing ? 1 : 0);
  a["comm_timing"] = std::string(m.settings.sync_timing
                                     ? "blocking collectives: transfer after a barrier on the group (wait apart); "
                                       "point-to-point and non-blocking calls: issue to completion"
                                     : "every call issue to completion (wait for late peers included)");
  a["compute_timing"] = std::string("kernels timed directly around each Backend call (gemm + other)");
}

std::string summary_header() {
  // What each time measures, said once above the table: the communication column adds up every
  // call from issue to completion, so where non-blocking calls overlap compute it can exceed the
  // step; the peak is the allocator's over the run, communication buffers and workspaces included.
  const std::string legend =
      "comm ms: every collective of a step from issue to completion, summed (non-blocking calls overlap compute, so "
      "comm can exceed step); compute ms: the kernels; step ms: wall time; all the slowest rank's, mean of the timed "
      "steps.  peak MiB: the allocator's peak over the run, communication buffers and workspaces included; its model "
      "counts the same categories.\n";
  constexpr const char* kHeader =
      "{:<24} {:>6} {:>6} | {:>9} {:>9} | {:>8} {:>8} {:>7} | {:>8} {:>8} | {:>8} {:>8} {:>7} | {:>8} {:>8} |";
  return legend + fmt::format(fmt::runtime(std::string(kHeader) + " {}"), "mode / mesh", "rows", "hidden", "comm MiB", "bytes",
                     "comm ms", "comm ms", "comm", "compute", "compute", "step ms", "step ms", "step", "peak MiB",
                     "peak MiB", "check") +
         "\n" +
         fmt::format(fmt::runtime(kHeader), "", "global", "", "per step", "meas/mod", "measured", "model", "m/mod",
                     "ms meas", "ms model", "measured", "model", "m/mod", "measured", "model");
}

std::string summary_row(const LayerMeasurement& m, const BenchSummary& s) {
  const cost::Workload& w = m.workload;
  const double ratio = s.bytes_model > 0 ? s.bytes_measured / s.bytes_model : (s.bytes_measured == 0 ? 1.0 : 0.0);
  return fmt::format(
      "{:<24} {:>6} {:>6} | {:>9.3f} {:>8.3f}{} | {:>8.3f} {:>8.3f} {:>7.1f} | {:>8.3f} {:>8.3f} | {:>8.3f} {:>8.3f} "
      "{:>7.1f} | {:>8.2f} {:>8.2f} | {}",
      describe_mesh(w.mode, w.mesh), w.rows * Topology(w.mesh).dp(), w.hidden, s.bytes_measured / kMiB, ratio,
      s.bytes_match ? " " : "!", s.comm_measured * 1e3, s.comm_model * 1e3,
      s.comm_model > 0 ? s.comm_measured / s.comm_model : 0.0, s.compute_measured * 1e3, s.compute_model * 1e3,
      s.step_measured * 1e3, s.step_model * 1e3, s.step_model > 0 ? s.step_measured / s.step_model : 0.0,
      s.peak_bytes / kMiB, s.peak_model_bytes / kMiB, check_verdict(m));
}

std::string skew_line(const LayerMeasurement& m, const BenchSummary& s) {
  if (!m.settings.sync_timing) return "";
  return fmt::format("{:<24} sync timing: transfer {:.3f} ms (model {:.3f} ms, ratio {:.2f}), wait for the last peer "
                     "(skew) {:.3f} ms per step",
                     "", s.comm_measured * 1e3, s.comm_model * 1e3,
                     s.comm_model > 0 ? s.comm_measured / s.comm_model : 0.0, s.wait_measured * 1e3);
}

}  // namespace mdtp::bench
