#include "bench/layer_runner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "bench/mode_mesh.hpp"
#include "comm/bookkeeping_collectives.hpp"
#include "comm/run_clock.hpp"
#include "modes/registry.hpp"
#include "run/rank_stats.hpp"
#include "bench/step_inputs.hpp"
#include "bench/timed_backend.hpp"
#include "spec/names.hpp"
#include "tp/parameter.hpp"

namespace mdtp::bench {
namespace {

using Clock = RunClock;

struct PhaseSample {  // this rank, one step, one phase
  double wall = 0, comm = 0, gemm = 0, other = 0, wait = 0;
};

void barrier(MPI_Comm comm, WaitPolicy policy) {
  bookkeeping_barrier(comm, policy, WaitLabel{group::world, "barrier (bench step)", -1, nullptr});
}

double relative_deviation(double value, double reference) {
  if (value == reference) return 0.0;
  if (std::isnan(value) || std::isnan(reference)) return INFINITY;
  return std::abs(value - reference) / std::max(std::abs(reference), 1e-300);
}

// One step's three phases, each measured; returns Y and dX through the arguments.
class StepRunner {
 public:
  StepRunner(LayerUnderTest& layer, const Mesh& mesh, CommLedger& ledger, const TimedBackend& timed,
             std::string data_parallel_group)
      : layer_(layer), mesh_(mesh), ledger_(ledger), timed_(timed), dp_group_(std::move(data_parallel_group)) {}

  std::vector<PhaseSample> run(const Tensor& x, const Tensor& dy, Tensor& y, Tensor& dx) {
    std::vector<PhaseSample> samples;
    samples.push_back(measure(phase::forward, [&] { y = layer_.forward(x); }));
    samples.push_back(measure(phase::backward, [&] { dx = layer_.backward(dy); }));
    samples.push_back(measure(phase::grad_sync, [&] { reduce_gradients(layer_.parameters(), mesh_, timed_, dp_group_); }));
    return samples;
  }

 private:
  template <class Body>
  PhaseSample measure(const std::string& phase, Body&& body) {
    const std::size_t first_entry = ledger_.entries().size();
    const KernelSeconds kernels_before = timed_.seconds();
    const auto start = Clock::now();
    {
      PhaseScope scope(ledger_, phase);
      body();
    }
    PhaseSample s;
    s.wall = std::chrono::duration<double>(Clock::now() - start).count();
    for (std::size_t e = first_entry; e < ledger_.entries().size(); ++e) {
      s.comm += ledger_.entries()[e].seconds;
      s.wait += ledger_.entries()[e].wait_seconds;
    }
    s.gemm = timed_.seconds().gemm - kernels_before.gemm;
    s.other = timed_.seconds().other - kernels_before.other;
    return s;
  }

  LayerUnderTest& layer_;
  const Mesh& mesh_;
  CommLedger& ledger_;
  const TimedBackend& timed_;
  std::string dp_group_;
};

std::vector<StepTiming> reduce_timings(const std::vector<std::vector<PhaseSample>>& per_step, MPI_Comm world,
                                       WaitPolicy policy) {
  // Per (step, phase) six numbers; the whole step is a sixth "phase" summed on this rank first,
  // because the max over ranks of a sum is not the sum of the maxima.
  constexpr std::size_t kFields = 6;
  const std::size_t phases = step_phases().size() + 1;
  std::vector<double> values;
  for (const auto& step : per_step) {
    PhaseSample total;
    for (std::size_t p = 0; p <= step.size(); ++p) {
      const PhaseSample s = p < step.size() ? step[p] : total;
      if (p < step.size()) {
        total.wall += s.wall, total.comm += s.comm, total.gemm += s.gemm, total.other += s.other;
        total.wait += s.wait;
      }
      values.insert(values.end(), {s.wall, s.comm, s.gemm + s.other, s.gemm, s.wall - s.gemm - s.other, s.wait});
    }
  }
  const std::vector<MeanMax> stats = run::mean_max_over_ranks(values, world, policy);
  std::vector<StepTiming> out;
  for (std::size_t r = 0; r < per_step.size(); ++r) {
    for (std::size_t p = 0; p < phases; ++p) {
      const MeanMax* v = &stats[(r * phases + p) * kFields];
      StepTiming t;
      t.rep = static_cast<int>(r);
      t.phase = p < step_phases().size() ? step_phases()[p] : "step";
      t.wall = v[0], t.comm = v[1], t.compute = v[2], t.gemm = v[3], t.exposed = v[4], t.wait = v[5];
      out.push_back(t);
    }
  }
  return out;
}

std::vector<MemoryStat> reduce_memory(const std::vector<double>& after_setup, const MemoryTracker& tracker,
                                      MPI_Comm world, WaitPolicy policy) {
  std::vector<double> values = after_setup;
  for (std::size_t c = 0; c < kMemCategoryCount; ++c)
    values.push_back(static_cast<double>(tracker.peak(static_cast<MemCategory>(c))));
  values.push_back(static_cast<double>(tracker.peak_total()));
  const std::vector<MeanMax> stats = run::mean_max_over_ranks(values, world, policy);
  const std::size_t n = kMemCategoryCount + 1;
  std::vector<MemoryStat> out;
  for (std::size_t c = 0; c < n; ++c)
    out.push_back({c < kMemCategoryCount ? mem_category_name(static_cast<MemCategory>(c)) : "total", stats[c],
                   stats[n + c]});
  return out;
}

}  // namespace

void validate_workload(const cost::Workload& w) {
  Topology topology(w.mesh);  // validates the mesh itself
  bool known_layer = false;
  for (const auto& k : layer_kinds()) known_layer = known_layer || k == w.layer;
  require(known_layer, "unknown layer '", w.layer, "'; expected linear, layernorm or mlp");
  require(w.hidden > 0, "--hidden must be positive; got ", w.hidden);
  require(w.layer == "layernorm" || w.ffn_hidden > 0, "--ffn must be positive for the ", w.layer, " layer; got ",
          w.ffn_hidden);
  require(w.data_parallel_group.empty() || w.data_parallel_group == group::dp,
          "the data-parallel group must be \"dp\" or empty; got '", w.data_parallel_group, "'");
  const std::int64_t rows_unit = row_unit(w.mode, w.mesh);
  require(w.rows > 0 && w.rows % rows_unit == 0, "mode ", describe_mesh(w.mode, w.mesh),
          " needs the rows of each data-parallel replica divisible by ", rows_unit, " (the mode's row split); got ",
          w.rows);
  const bool mode_1d = is_megatron_1d(w.mode);
  const std::int64_t hidden_unit = mode_1d ? 1 : feature_unit(w.mode, w.mesh);
  require(w.hidden % hidden_unit == 0, "mode ", describe_mesh(w.mode, w.mesh), " needs --hidden divisible by ",
          hidden_unit, "; got ", w.hidden);
  if (w.layer != "layernorm") {
    const std::int64_t ffn_unit = feature_unit(w.mode, w.mesh);
    require(w.ffn_hidden % ffn_unit == 0, "mode ", describe_mesh(w.mode, w.mesh), " needs --ffn divisible by ",
            ffn_unit, "; got ", w.ffn_hidden);
  }
}

LayerMeasurement run_layer_bench(const cost::Workload& workload, const RunSettings& settings, MPI_Comm world,
                                 const run::RunDescription& run) {
  require(settings.reps >= 1, "--reps must be at least 1; got ", settings.reps);
  require(settings.warmup >= 0, "--warmup must not be negative; got ", settings.warmup);
  validate_workload(workload);

  LayerMeasurement m;
  m.workload = workload;
  m.settings = settings;
  CommLedger ledger;
  ledger.set_sync_timing(settings.sync_timing);
  Mesh mesh(workload.mesh, world, ledger);
  const WaitPolicy policy = mesh.wait_policy();
  m.wait_policy = wait_policy_name(policy);
  auto host = settings.make_backend ? settings.make_backend() : make_host_backend();
  TimedBackend timed(*host);
  auto mode = make_tp_mode(workload.mode, TpContext{mesh, timed, workload.dtype, settings.seed, workload.options});
  auto layer = make_layer_under_test(*mode, workload);
  const Tensor x = make_input_shard(kInputName, settings.input_seed, layer->input_layout(), mesh, *host,
                                    workload.dtype, workload.rows, layer->in_features());
  const Tensor dy = make_input_shard(kOutputGradName, settings.input_seed, layer->output_layout(), mesh, *host,
                                     workload.dtype, workload.rows, layer->out_features());
  run::RunDescription described = run;
  described.backend = host->name();
  m.provenance = run::collect_provenance(mesh, world, described);
  m.oversubscription = std::get<double>(m.provenance.at("oversubscription"));

  StepRunner step(*layer, mesh, ledger, timed, workload.data_parallel_group);
  Tensor y, dx;
  // The checked step (also the first warm-up); its output checksums are the reference of the
  // timed steps.
  ledger.set_enabled(false);
  step.run(x, dy, y, dx);
  if (settings.check) {
    m.check = check_against_serial(*layer, y, dx, mesh, *host, workload, settings.seed, settings.input_seed, world);
  }
  const double y_reference = host->sum_squares(y), dx_reference = host->sum_squares(dx);
  for (int w = 0; w < settings.warmup; ++w) {
    zero_gradients(layer->parameters(), *host);
    step.run(x, dy, y, dx);
  }

  std::vector<double> after_setup;
  MemoryTracker& tracker = host->allocator().tracker();
  for (std::size_t c = 0; c < kMemCategoryCount; ++c)
    after_setup.push_back(static_cast<double>(tracker.current(static_cast<MemCategory>(c))));
  after_setup.push_back(static_cast<double>(tracker.current_total()));
  ledger.clear();
  ledger.set_enabled(true);
  tracker.reset_peaks();
  std::vector<std::vector<PhaseSample>> samples;
  double deviation = 0.0;
  for (int r = 0; r < settings.reps; ++r) {
    zero_gradients(layer->parameters(), *host);
    barrier(world, policy);
    samples.push_back(step.run(x, dy, y, dx));
    deviation = std::max({deviation, relative_deviation(host->sum_squares(y), y_reference),
                          relative_deviation(host->sum_squares(dx), dx_reference)});
  }
  ledger.set_enabled(false);

  m.steps = reduce_timings(samples, world, policy);
  m.comm = reduce_ledger_stats(ledger, world, policy);
  m.memory = reduce_memory(after_setup, tracker, world, policy);
  m.repeat_deviation = run::mean_max_over_ranks(deviation, world, policy).max;
  return m;
}

}  // namespace mdtp::bench
