// mdtp bench: measured communication, compute and memory of one layer in each tensor-parallel
// mode, beside the cost model's prediction, appended to an HDF5 results file.  Run under mpiexec.
// One run (/runs/<NNNN>-bench) per (mode, hidden size), written as soon as it is measured; runs
// of one invocation share the attribute batch_id.  Exit status 1 when a correctness check failed
// or measured bytes differ from the model's.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "bench/bench_tables.hpp"
#include "calibrate/calibration_io.hpp"
#include "bench/mode_mesh.hpp"
#include "run/rank_stats.hpp"
#include "run/results_sink.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"

namespace mdtp::cli {
namespace {

const char* kUsage =
    "usage: mpiexec -n N mdtp bench [options]\n"
    "  --modes LIST|all     modes: none,1d,1d-sp,2d,2.5d,3d (all: the TP modes that fit N)   [all]\n"
    "  --layer KIND         linear | layernorm | mlp                                           [mlp]\n"
    "  --batch B --seq S    global batch of B·S rows, split over the data-parallel replicas   [8, 32]\n"
    "  --hidden H[,H2,...]  hidden size(s): one run per mode and size                          [256]\n"
    "  --ffn F[,F2,...]     MLP inner / Linear output size, one per hidden size              [4·H]\n"
    "  --depth D            2.5D depth (default: the largest d·q² dividing N, preferring d ≥ 2)\n"
    "  --dtype f32|f64                                                                          [f32]\n"
    "  --warmup N --reps N  untimed and timed steps                                            [2, 5]\n"
    "  --calibration FILE.h5[:/runs/NNNN-calibrate]  α-β parameters (default: the latest calibrate\n"
    "                       run in FILE; without the option, default link parameters, flagged)\n"
    "  --out FILE.h5        results file, created or appended to, never overwritten  [results/bench.h5]\n"
    "  --ranks-per-node N   placement for link classes (0: one node)                             [0]\n"
    "  --keep-gathered-3d   3D: keep gathered X and W for backward (fewer collectives, more memory)\n"
    "  --no-check           skip the comparison with the serial recomputation (large sizes)\n"
    "Mesh per mode on N ranks: 1d/1d-sp tp=N; 2d the largest square q² dividing N (dp = N/q²);\n"
    "2.5d d·q²; 3d the largest cube; none = pure data parallelism (tp=1, dp=N).\n";

std::vector<TpMode> selected_modes(const Args& args, int world, int depth) {
  const std::vector<std::string> names = args.get_list("--modes", {"all"});
  std::vector<TpMode> modes;
  if (names.size() == 1 && names[0] == "all") {
    modes = bench::modes_that_fit(world, depth);
    require(!modes.empty(), "no tensor-parallel mode fits ", world, " ranks (1d needs at least 2); use --modes none");
  } else {
    for (const auto& name : names) modes.push_back(parse_tp_mode(name));
  }
  for (const auto& mode : modes)
    require(bench::mesh_for_mode(mode, world, depth).has_value(), "mode ", mode, " does not fit ", world,
            " ranks (2d needs a square ≥ 4 dividing it, 2.5d d·q², 3d a cube ≥ 8, 1d at least 2)");
  return modes;
}

std::vector<cost::Workload> workloads(const Args& args, int world) {
  const int depth = static_cast<int>(args.get_int("--depth", 0));
  const std::vector<TpMode> modes = selected_modes(args, world, depth);
  const long long batch = args.get_int("--batch", 8), seq = args.get_int("--seq", 32);
  require(batch > 0 && seq > 0, "--batch and --seq must be positive; got ", batch, " and ", seq);
  const std::vector<long long> hidden = args.get_int_list("--hidden", {256});
  std::vector<long long> ffn = args.get_int_list("--ffn", {});
  require(!hidden.empty(), "--hidden needs at least one size");
  require(ffn.empty() || ffn.size() == 1 || ffn.size() == hidden.size(), "--ffn needs one size or one per --hidden (",
          hidden.size(), "); got ", ffn.size());
  const DType dtype = parse_dtype(args.get("--dtype", "f32"));
  require(dtype == DType::f32 || dtype == DType::f64, "the host benchmark runs f32 or f64; got --dtype ",
          dtype_name(dtype));
  std::vector<cost::Workload> out;
  for (const auto& mode : modes) {
    for (std::size_t h = 0; h < hidden.size(); ++h) {
      cost::Workload w;
      w.mode = mode;
      w.mesh = *bench::mesh_for_mode(mode, world, depth);
      w.mesh.ranks_per_node = static_cast<int>(args.get_int("--ranks-per-node", 0));
      w.layer = args.get("--layer", "mlp");
      // The global batch is the same for every mode: each data-parallel replica takes its share.
      const int dp = Topology(w.mesh).dp();
      require((batch * seq) % dp == 0, "mode ", bench::describe_mesh(mode, w.mesh), " splits the batch·seq = ",
              batch * seq, " rows over dp=", dp, "; choose --batch·--seq divisible by ", dp);
      w.rows = batch * seq / dp;
      w.data_parallel_group = dp > 1 ? "dp" : "";
      w.hidden = hidden[h];
      w.ffn_hidden = ffn.empty() ? 4 * hidden[h] : (ffn.size() == 1 ? ffn[0] : ffn[h]);
      w.dtype = dtype;
      w.options.keep_gathered_3d = args.flag("--keep-gathered-3d");
      bench::validate_workload(w);
      out.push_back(w);
    }
  }
  return out;
}

}  // namespace

int run_bench(const std::vector<std::string>& argv) {
  Args args(argv,
            {"--modes", "--layer", "--batch", "--seq", "--hidden", "--ffn", "--depth", "--dtype", "--warmup", "--reps",
             "--calibration", "--out", "--ranks-per-node"},
            {"--keep-gathered-3d", "--no-check", "--help"});
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (args.flag("--help")) {
    if (rank == 0) std::cout << kUsage;
    return 0;
  }
  // Everything that can be refused is refused here, on every rank, before any collective.
  const std::vector<cost::Workload> cases = workloads(args, world);
  bench::RunSettings settings;
  settings.warmup = static_cast<int>(args.get_int("--warmup", 2));
  settings.reps = static_cast<int>(args.get_int("--reps", 5));
  settings.check = !args.flag("--no-check");
  require(settings.reps >= 1 && settings.reps <= 100000, "--reps must be between 1 and 100000; got ", settings.reps);
  require(settings.warmup >= 0 && settings.warmup <= 100000, "--warmup must be between 0 and 100000; got ",
          settings.warmup);
  const calibrate::LinkParameters links = args.has("--calibration")
                                          ? calibrate::load_calibration(args.get("--calibration", ""))
                                          : calibrate::default_link_parameters();

  run::ResultsSink sink(args.get("--out", "results/bench.h5"), MPI_COMM_WORLD);
  const NodeOccupancy occupancy = measure_node_occupancy(MPI_COMM_WORLD);
  const WaitPolicy policy = resolve_wait_policy(occupancy);
  const double oversubscription = run::mean_max_over_ranks(occupancy.oversubscription(), MPI_COMM_WORLD, policy).max;
  const std::string batch_id =
      run::broadcast_string(run::utc_time_now() + "-" + std::to_string(getpid()), 0, MPI_COMM_WORLD, policy);
  if (rank == 0) {
    std::printf("mdtp bench: %d ranks, %d on %d cores of rank 0's node (oversubscription %.2g), wait policy %s\n",
                world, occupancy.local_ranks, occupancy.cores, oversubscription, wait_policy_name(policy));
    std::printf("link parameters: %s\n", links.source.c_str());
    if (oversubscription > 1.0)
      std::printf("NOTE: more ranks than cores: measured times are dominated by the OS scheduler (ranks taking turns\n"
                  "      on the cores), not by the algorithms or the links; the bytes are exact regardless.\n");
    std::printf("results: %s (batch %s)\n\n%s\n", sink.path().c_str(), batch_id.c_str(),
                bench::summary_header().c_str());
    std::fflush(stdout);
  }

  run::RunDescription run{"mdtp bench " + args.command_line(), "", dtype_name(cases.front().dtype), ""};
  std::vector<std::string> rows;
  bool all_good = true;
  for (const auto& w : cases) {
    run.mode = tp_mode_name(w.mode);
    bench::LayerMeasurement m = bench::run_layer_bench(w, settings, MPI_COMM_WORLD, run);
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
      std::printf("%s   -> %s\n", rows.back().c_str(), path.c_str());
      std::fflush(stdout);
    }
  }
  if (rank == 0) {
    std::printf("\n== comparison (per step; times: max over ranks, mean over %d reps)\n%s\n", settings.reps,
                bench::summary_header().c_str());
    for (const auto& row : rows) std::printf("%s\n", row.c_str());
    if (!all_good)
      std::printf("\nmdtp bench: FAILED: a correctness check failed or measured bytes differ from the model "
                  "(marked '!'); see the check and comm tables\n");
  }
  return all_good ? 0 : 1;
}

}  // namespace mdtp::cli
