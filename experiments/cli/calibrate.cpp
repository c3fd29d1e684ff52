// mdtp calibrate: nccl-tests-style sweeps of the collectives on the mesh's groups, and the α-β
// link parameters fitted to them (the cost model's Calibration), appended to an HDF5 results
// file as /runs/<NNNN>-calibrate (tables "sweep", "link_params", "collective_fits" and
// "gemm_rates": bench/calibration_io.hpp).  Run under mpiexec.
//
// It refuses an oversubscribed run (more ranks on a node than its cores): those times measure the
// OS scheduler, and a model calibrated on them would be wrong everywhere else.
// --allow-oversubscribed runs anyway and flags every output (attribute, printed warning).
#include <cstdio>
#include <iostream>

#include "calibrate/calibration_fit.hpp"
#include "calibrate/collective_sweep.hpp"
#include "run/provenance.hpp"
#include "run/rank_stats.hpp"
#include "run/results_sink.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"

namespace mdtp::cli {
namespace {

const char* kUsage =
    "usage: mpiexec -n N mdtp calibrate [options]\n"
    "  --tp T                 TP size of the mesh whose groups are swept (default N/2 when N is even\n"
    "                         and ≥ 4, so that tp and dp both have ≥ 2 ranks; else N)\n"
    "  --tp-mode M --tp-depth D --ranks-per-node R   the rest of the mesh (see `mdtp mesh`)\n"
    "  --groups LIST          mesh groups to sweep (one-rank groups are skipped)     [world,tp,dp]\n"
    "  --ops LIST|all         all_reduce,all_gather,reduce_scatter,broadcast,reduce          [all]\n"
    "  --min-bytes B --max-bytes B --factor F   sizes B, B·F, ... (suffixes K, M, G)   [8, 64M, 2]\n"
    "  --warmup N --iters N   untimed and timed calls per size (fewer above 1 MiB)          [5, 20]\n"
    "  --dtype f32|f64                                                                          [f32]\n"
    "  --gemm-size N          side of the square GEMM timed for the compute model              [512]\n"
    "  --out FILE.h5          results file, created or appended to            [results/calibration.h5]\n"
    "  --allow-oversubscribed run even with more ranks than cores (outputs flagged)\n";

std::int64_t parse_bytes(const Args& args, const std::string& option, std::int64_t fallback) {
  if (!args.has(option)) return fallback;
  std::string text = args.get(option, "");
  std::int64_t scale = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K': case 'k': scale = 1ll << 10; break;
      case 'M': case 'm': scale = 1ll << 20; break;
      case 'G': case 'g': scale = 1ll << 30; break;
      default: break;
    }
    if (scale != 1) text.pop_back();
  }
  try {
    std::size_t used = 0;
    const long long v = std::stoll(text, &used);
    require(used == text.size() && v > 0, "");
    return v * scale;
  } catch (...) {
    throw_error("option ", option, " needs a positive byte count like 4096, 64K or 16M; got '", args.get(option, ""), "'");
  }
}

MeshConfig calibration_mesh(const Args& args, int world) {
  MeshConfig c;
  c.world = world;
  c.tp = static_cast<int>(args.get_int("--tp", world % 2 == 0 && world >= 4 ? world / 2 : world));
  c.tp_mode = parse_tp_mode(args.get("--tp-mode", "1d"));
  c.tp_depth = static_cast<int>(args.get_int("--tp-depth", 1));
  c.ranks_per_node = static_cast<int>(args.get_int("--ranks-per-node", 0));
  Topology check(c);  // every rank refuses a bad mesh alike, before any collective
  return c;
}

void print_point(const calibrate::SweepPoint& p) {
  std::printf("%-8s %3d %-15s %12lld %6d %12.2f %12.2f %10.3f %10.3f  %s\n", p.group.c_str(), p.group_size,
              collective_name(p.op), static_cast<long long>(p.bytes), p.iterations, p.seconds_mean * 1e6,
              p.seconds_max * 1e6, p.algbw / 1e9, p.busbw / 1e9, p.correct ? "ok" : "WRONG");
  std::fflush(stdout);
}

}  // namespace

int run_calibrate(const std::vector<std::string>& argv) {
  Args args(argv,
            {"--tp", "--tp-mode", "--tp-depth", "--ranks-per-node", "--groups", "--ops", "--min-bytes", "--max-bytes",
             "--factor", "--warmup", "--iters", "--dtype", "--gemm-size", "--out"},
            {"--allow-oversubscribed", "--help"});
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (args.flag("--help")) {
    if (rank == 0) std::cout << kUsage;
    return 0;
  }
  require(world >= 2, "mdtp calibrate measures links between ranks: run it under mpiexec with at least 2 ranks; got ",
          world);
  const MeshConfig config = calibration_mesh(args, world);
  calibrate::SweepSettings sweep;
  sweep.groups = args.get_list("--groups", sweep.groups);
  if (args.has("--ops") && args.get("--ops", "") != "all") {
    sweep.ops.clear();
    for (const auto& name : args.get_list("--ops", {})) sweep.ops.push_back(calibrate::parse_collective(name));
  }
  sweep.min_bytes = parse_bytes(args, "--min-bytes", sweep.min_bytes);
  sweep.max_bytes = parse_bytes(args, "--max-bytes", sweep.max_bytes);
  sweep.factor = static_cast<int>(args.get_int("--factor", sweep.factor));
  sweep.warmup = static_cast<int>(args.get_int("--warmup", sweep.warmup));
  sweep.iterations = static_cast<int>(args.get_int("--iters", sweep.iterations));
  sweep.dtype = parse_dtype(args.get("--dtype", "f32"));
  const std::int64_t gemm_size = args.get_int("--gemm-size", 512);
  require(gemm_size >= 16 && gemm_size <= 8192, "--gemm-size must be between 16 and 8192; got ", gemm_size);
  const std::string out = args.get("--out", "results/calibration.h5");
  const bool allow_oversubscribed = args.flag("--allow-oversubscribed");

  // The refusal comes before the results file is touched: a refused run writes nothing.
  const NodeOccupancy occupancy = measure_node_occupancy(MPI_COMM_WORLD);
  const double oversubscription =
      run::mean_max_over_ranks(occupancy.oversubscription(), MPI_COMM_WORLD, WaitPolicy::polite).max;
  const bool oversubscribed = oversubscription > 1.0;
  require(!oversubscribed || allow_oversubscribed, "refusing to calibrate oversubscribed: ", occupancy.local_ranks,
          " ranks share ", occupancy.cores, " core(s) on a node (oversubscription ", oversubscription,
          "), so the times would measure the OS scheduler, not the links. Run at most one rank per core, or pass "
          "--allow-oversubscribed to run anyway with every output flagged");

  CommLedger ledger;
  Mesh mesh(config, MPI_COMM_WORLD, ledger);
  calibrate::validate_sweep(sweep, mesh);
  run::ResultsSink sink(out, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf("mdtp calibrate: %d ranks (%d on %d cores, oversubscription %.2g), wait policy %s, mesh tp=%d dp=%d\n",
                world, occupancy.local_ranks, occupancy.cores, oversubscription, wait_policy_name(mesh.wait_policy()),
                mesh.topology().tp(), mesh.topology().dp());
    if (oversubscribed)
      std::printf("WARNING: OVERSUBSCRIBED (--allow-oversubscribed): these times measure the scheduler; the fit is "
                  "flagged in the results file and must not be used for predictions elsewhere\n");
    std::string swept;
    for (const auto& g : calibrate::swept_groups(sweep, mesh)) swept += " " + g;
    std::printf("groups swept:%s (one-rank groups and repeats of the same ranks are skipped)\n", swept.c_str());
    std::printf("\n%-8s %3s %-15s %12s %6s %12s %12s %10s %10s  %s\n", "group", "n", "op", "bytes", "iters",
                "mean us", "max us", "algbw GB/s", "busbw GB/s", "check");
  }
  const std::vector<calibrate::SweepPoint> points = calibrate::run_sweep(mesh, sweep, MPI_COMM_WORLD, print_point);
  bool all_correct = true;
  for (const auto& p : points) all_correct = all_correct && p.correct;

  const std::vector<calibrate::GemmRate> gemm = calibrate::measure_gemm_rates(gemm_size, mesh, MPI_COMM_WORLD);
  const calibrate::CalibrationResult fit = calibrate::fit_calibration(points, gemm);
  Attributes attributes = run::collect_provenance(mesh, MPI_COMM_WORLD,
                                                    {"mdtp calibrate " + args.command_line(), "", dtype_name(sweep.dtype), "host"});
  attributes["allow_oversubscribed"] = static_cast<std::int64_t>(allow_oversubscribed ? 1 : 0);
  attributes["sweep_min_bytes"] = sweep.min_bytes;
  attributes["sweep_max_bytes"] = sweep.max_bytes;
  attributes["sweep_factor"] = static_cast<std::int64_t>(sweep.factor);
  attributes["sweep_warmup"] = static_cast<std::int64_t>(sweep.warmup);
  attributes["sweep_iters"] = static_cast<std::int64_t>(sweep.iterations);
  attributes["gemm_size"] = gemm_size;
  attributes["all_correct"] = static_cast<std::int64_t>(all_correct ? 1 : 0);
  if (oversubscribed) attributes["warning"] = std::string("OVERSUBSCRIBED: times measure the OS scheduler");
  const std::string path = sink.append_run("calibrate", attributes, calibrate::calibrate_run_tables(points, fit));
  if (rank == 0) {
    std::printf("\n%s\n", calibrate::describe_fit(fit).c_str());
    std::printf("written: %s:%s%s\n", sink.path().c_str(), path.c_str(),
                oversubscribed ? "   (flagged OVERSUBSCRIBED)" : "");
    if (!all_correct) std::printf("mdtp calibrate: FAILED: some collective results were wrong (check column)\n");
  }
  return all_correct ? 0 : 1;
}

}  // namespace mdtp::cli
