// mdtp bench: measured communication, compute and memory of one layer in each tensor-parallel
// mode, beside the cost model's prediction, appended to an HDF5 results file.  Run under mpiexec.
// One run (/runs/<NNNN>-bench) per (mode, hidden size), written as soon as it is measured; runs
// of one invocation share the attribute batch_id.  Exit status 1 when a correctness check failed
// or measured bytes differ from the model's.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>

#include "bench/bench_tables.hpp"
#include "bench/mode_mesh.hpp"
#include "calibrate/calibration_io.hpp"
#include "cli/commands.hpp"
#include "cli/spec_flags.hpp"
#include "comm/run_clock.hpp"
#include "run/rank_stats.hpp"
#include "simulate/charging_backend.hpp"
#include "run/results_sink.hpp"

namespace mdtp::cli {
namespace {

struct BenchOptions {
  std::vector<TpMode> modes;  // empty: all the TP modes that fit the world
  std::string layer = "mlp";
  long long batch = 8, seq = 32;
  std::vector<long long> hidden{256};
  std::vector<long long> ffn;  // empty: 4 * hidden
  int depth = 0;               // 0: chosen per world size
  DType dtype = DType::f32;
  bench::RunSettings settings;
  bool no_check = false;
  std::string calibration;
  std::string out = "results/bench.h5";
  int ranks_per_node = 0;
  bool keep_gathered_3d = false;
  bool sync_timing = false;
};

std::vector<TpMode> selected_modes(const BenchOptions& o, int world) {
  std::vector<TpMode> modes = o.modes;
  if (modes.empty()) {
    modes = bench::modes_that_fit(world, o.depth);
    require(!modes.empty(), "no tensor-parallel mode fits ", world, " ranks (1d needs at least 2); use --modes none");
  }
  for (const auto& mode : modes)
    require(bench::mesh_for_mode(mode, world, o.depth).has_value(), "mode ", mode, " does not fit ", world,
            " ranks (2d needs a square >= 4 dividing it, 2.5d d*q^2, 3d a cube >= 8, 1d at least 2)");
  return modes;
}

// One workload per (mode, hidden size); everything that can be refused is refused here, on every
// rank, before any collective.
std::vector<cost::Workload> workloads(const BenchOptions& o, int world) {
  const std::vector<TpMode> modes = selected_modes(o, world);
  require(o.ffn.empty() || o.ffn.size() == 1 || o.ffn.size() == o.hidden.size(),
          "--ffn-hidden needs one size or one per --hidden (", o.hidden.size(), "); got ", o.ffn.size());
  require(o.dtype == DType::f32 || o.dtype == DType::f64, "the host benchmark runs f32 or f64; got --dtype ",
          dtype_name(o.dtype));
  std::vector<cost::Workload> out;
  for (const auto& mode : modes) {
    for (std::size_t h = 0; h < o.hidden.size(); ++h) {
      cost::Workload w;
      w.mode = mode;
      w.mesh = *bench::mesh_for_mode(mode, world, o.depth);
      w.mesh.ranks_per_node = o.ranks_per_node;
      w.layer = o.layer;
      // The global batch is the same for every mode: each data-parallel replica takes its share.
      const int dp = Topology(w.mesh).dp();
      require((o.batch * o.seq) % dp == 0, "mode ", bench::describe_mesh(mode, w.mesh), " splits the batch*seq = ",
              o.batch * o.seq, " rows over dp=", dp, "; choose --global-batch*--seq divisible by ", dp);
      w.rows = o.batch * o.seq / dp;
      w.data_parallel_group = dp > 1 ? "dp" : "";
      w.hidden = o.hidden[h];
      w.ffn_hidden = o.ffn.empty() ? 4 * o.hidden[h] : (o.ffn.size() == 1 ? o.ffn[0] : o.ffn[h]);
      w.dtype = o.dtype;
      w.options.keep_gathered_3d = o.keep_gathered_3d;
      bench::validate_workload(w);
      out.push_back(w);
    }
  }
  return out;
}

void print_header(int world, const NodeOccupancy& occupancy, double oversubscription, WaitPolicy policy,
                  const calibrate::LinkParameters& links, const std::string& results, const std::string& batch_id) {
  fmt::print("mdtp bench: {} ranks, {} on {} cores of rank 0's node (oversubscription {:.2g}), wait policy {}\n",
             world, occupancy.local_ranks, occupancy.cores, oversubscription, wait_policy_name(policy));
  fmt::print("link parameters: {}\n", links.source);
  if (oversubscription > 1.0)
    fmt::print("NOTE: more ranks than cores: measured times are dominated by the OS scheduler (ranks taking turns\n"
               "      on the cores), not by the algorithms or the links; the bytes are exact regardless.\n");
  fmt::print("results: {} (batch {})\n\n{}\n", results, batch_id, bench::summary_header());
  std::fflush(stdout);
}

int run_bench(BenchOptions o, const std::string& command_line) {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // Under `mdtp simulate` the model columns price the simulated cluster's links (its preset's α,
  // bandwidth and efficiency, the rates the generated platform declares), its nodes of
  // gpus_per_node ranks unless --ranks-per-node says otherwise.
  std::optional<cost::Cluster> simulated;
  if (simulated_build()) {
    require(o.calibration.empty(), "--calibration does not apply under mdtp simulate: the model columns price the "
                                   "simulated cluster's links; got --calibration ", o.calibration);
    simulated = simulate::simulated_cluster();
    if (o.ranks_per_node == 0) o.ranks_per_node = simulated->gpus_per_node;
  }
  const std::vector<cost::Workload> cases = workloads(o, world);
  o.settings.check = !o.no_check;
  if (simulated) o.settings.make_backend = simulate::simulated_backend_factory();
  o.settings.sync_timing = o.sync_timing || sync_timing_from_environment();
  calibrate::LinkParameters links;
  if (simulated) {
    links.model = cost::cluster_time_model(*simulated);
    links.source = "the simulated cluster " + simulated->name + " (its preset's links)";
  } else {
    links = o.calibration.empty() ? calibrate::default_link_parameters() : calibrate::load_calibration(o.calibration);
  }

  run::ResultsSink sink(o.out, MPI_COMM_WORLD);
  const NodeOccupancy occupancy = measure_node_occupancy(MPI_COMM_WORLD);
  const WaitPolicy policy = resolve_wait_policy(occupancy);
  const double oversubscription = run::mean_max_over_ranks(occupancy.oversubscription(), MPI_COMM_WORLD, policy).max;
  const std::string batch_id =
      run::broadcast_string(run::utc_time_now() + "-" + std::to_string(getpid()), 0, MPI_COMM_WORLD, policy);
  if (rank == 0) print_header(world, occupancy, oversubscription, policy, links, sink.path(), batch_id);

  run::RunDescription run{command_line, "", dtype_name(cases.front().dtype), ""};
  std::vector<std::string> rows;
  bool all_good = true;
  for (const auto& w : cases) {
    run.mode = tp_mode_name(w.mode);
    bench::LayerMeasurement m = bench::run_layer_bench(w, o.settings, MPI_COMM_WORLD, run);
    const bench::Prediction p = bench::predict(w, links.model);
    const bench::BenchSummary s = bench::summarize(m, p);
    Attributes attributes = m.provenance;
    bench::add_bench_attributes(attributes, m, s);
    attributes["batch_id"] = batch_id;
    attributes["calibration"] = links.source;
    attributes["calibrated"] = static_cast<std::int64_t>(links.calibrated ? 1 : 0);
    const std::string path = sink.append_run("bench", attributes, bench::bench_tables(m, p, s));
    all_good = all_good && s.bytes_match && (!m.check.ran || m.check.passed);
    rows.push_back(bench::summary_row(m, s));
    if (rank == 0) {
      fmt::print("{}   -> {}\n", rows.back(), path);
      if (o.settings.sync_timing) fmt::print("{}\n", bench::skew_line(m, s));
      std::fflush(stdout);
    }
  }
  if (rank == 0) {
    fmt::print("\n== comparison (per step; times: max over ranks, mean over {} reps)\n{}\n", o.settings.reps,
               bench::summary_header());
    for (const auto& row : rows) fmt::print("{}\n", row);
    if (o.settings.sync_timing)
      fmt::print("(sync timing: comm is the transfer of the blocking collectives after a barrier on their group; "
                 "the wait for the last peer is in the comm table's wait columns)\n");
    if (!all_good)
      fmt::print("\nmdtp bench: FAILED: a correctness check failed or measured bytes differ from the model "
                 "(marked '!'); see the check and comm tables\n");
  }
  return all_good ? 0 : 1;
}

}  // namespace

Command add_bench(CLI::App& root) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* app = add_command(root, "bench", "(MPI) measure a layer in each TP mode, beside the cost model");
  app->footer(
      "Run under mpiexec (mpiexec -n N mdtp bench): one checked step, warm-up and timed repetitions of a layer in\n"
      "each mode, with the cost model's prediction, appended to an HDF5 results file.\n"
      "Mesh per mode on N ranks: 1d/1d-sp tp=N; 2d the largest square q^2 dividing N (dp = N/q^2); 2.5d d*q^2;\n"
      "3d the largest cube; none = pure data parallelism (tp=1, dp=N).");
  add_parsed_list(*app, "--modes", o->modes, parse_tp_mode,
                  std::string("modes (") + tp_mode_list() + "), or all: the TP modes that fit N");
  add(*app, "--layer", o->layer, "the layer measured")->check(one_of({"linear", "layernorm", "mlp"}));
  add(*app, "--global-batch", o->batch, "global batch B (B*S rows, split over the data-parallel replicas)")
      ->check(at_least(1));
  add(*app, "--seq", o->seq, "sequence length S")->check(at_least(1));
  add(*app, "--hidden", o->hidden, "hidden size(s): one run per mode and size")
      ->type_name("H[,H2,...]")
      ->default_str("256");
  add(*app, "--ffn-hidden", o->ffn, "MLP inner / Linear output size, one, or one per hidden size (default 4*H)")
      ->type_name("F[,F2,...]");
  add(*app, "--tp-depth", o->depth, "2.5d depth (0: the largest d*q^2 dividing N, preferring d >= 2)");
  add_dtype(*app, "--dtype", o->dtype, "f32 or f64");
  add(*app, "--warmup", o->settings.warmup, "untimed steps")->check(between(0, 100000));
  add(*app, "--reps", o->settings.reps, "timed steps")->check(between(1, 100000));
  add(*app, "--calibration", o->calibration,
      "alpha-beta parameters: FILE.h5[:/runs/NNNN-calibrate] (default: the latest calibrate run in FILE; without "
      "the option, default link parameters, flagged)")
      ->type_name("FILE");
  add(*app, "--out", o->out, "results file, created or appended to, never overwritten")->type_name("FILE.h5");
  add(*app, "--ranks-per-node", o->ranks_per_node, "placement for link classes (0: one node)");
  app->add_flag("--keep-gathered-3d", o->keep_gathered_3d,
                "3d: keep gathered X and W for backward (fewer collectives, more memory)");
  app->add_flag("--sync-timing", o->sync_timing,
                "time each blocking collective after a barrier on its group: transfer and wait for the last peer "
                "apart (also MDTP_SYNC_TIMING=1)");
  app->add_flag("--no-check", o->no_check, "skip the comparison with the serial recomputation (large sizes)");
  // The run flags' names for what bench shares with them (cli/spec_flags.hpp); the old ones are refused.
  add_renamed_flags(*app, {{"--batch", "--global-batch"}, {"--depth", "--tp-depth"}, {"--ffn", "--ffn-hidden"}});
  return {app, true, [o](const std::string& command_line) { return run_bench(*o, command_line); }};
}

}  // namespace mdtp::cli
