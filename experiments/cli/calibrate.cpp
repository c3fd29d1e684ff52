// mdtp calibrate: nccl-tests-style sweeps of the collectives on the mesh's groups, and the α-β
// link parameters fitted to them (the cost model's Calibration), appended to an HDF5 results
// file as /runs/<NNNN>-calibrate (tables "sweep", "link_params", "collective_fits" and
// "gemm_rates": calibrate/calibration_io.hpp).  Run under mpiexec.
//
// It refuses an oversubscribed run (more ranks on a node than its cores): those times measure the
// OS scheduler, and a model calibrated on them would be wrong everywhere else.
// --allow-oversubscribed runs anyway and flags every output (attribute, printed warning).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include "calibrate/calibrated_cluster.hpp"
#include "calibrate/calibration_fit.hpp"
#include "calibrate/collective_sweep.hpp"
#include "calibrate/sweep_prediction.hpp"
#include "cli/commands.hpp"
#include "io/atomic_file.hpp"
#include "run/root_task.hpp"
#include "run/provenance.hpp"
#include "run/rank_stats.hpp"
#include "run/results_sink.hpp"

namespace mdtp::cli {
namespace {

struct CalibrateOptions {
  std::optional<int> tp;  // default N/2 when N is even and >= 4, else N
  TpMode tp_mode = TpMode::d1;
  int tp_depth = 1, ranks_per_node = 0;
  calibrate::SweepSettings sweep;
  std::int64_t gemm_size = 512;
  std::string out = "results/calibration.h5";
  bool allow_oversubscribed = false;
  // The machine as a cluster file for `mdtp plan` / `mdtp cost` (empty: none written).
  std::string cluster_out, cluster_name = "calibrated";
  std::vector<std::string> peak_flops;  // DTYPE=FLOP/S, declared peaks per rank
  // Fits cut at this size (calibration_fit.hpp); -1: from the L3 size and the ranks on the node.
  std::vector<std::int64_t> cache_knees;  // empty: calibrate::cache_knees; {0}: none
  bool sync_timing = false;
  std::string predict_with;  // a calibration whose predictions are printed beside each point
  // Sizes swept among the others but left out of the fit, which then predicts them.
  std::vector<std::int64_t> hold_out;
  bool cold_cache = false;
};

// The swept sizes: the series (or --sizes) with the held-out sizes merged in, in size order, so
// that fitted and held-out points are measured interleaved, under the same conditions.
std::vector<std::int64_t> sizes_with_hold_out(const calibrate::SweepSettings& s, const std::vector<std::int64_t>& hold_out) {
  std::vector<std::int64_t> sizes = s.sizes;
  if (sizes.empty())
    for (std::int64_t bytes = s.min_bytes; bytes <= s.max_bytes; bytes *= s.factor) sizes.push_back(bytes);
  sizes.insert(sizes.end(), hold_out.begin(), hold_out.end());
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

// A point measures a held-out size when its bytes are that size rounded up to whole elements
// divisible by the group (collective_sweep.cpp), i.e. within one element per rank of it.
bool held_out(const calibrate::SweepPoint& p, const std::vector<std::int64_t>& hold_out) {
  const std::int64_t width = p.elements > 0 ? p.bytes / p.elements : 4;
  for (std::int64_t h : hold_out)
    if (p.bytes >= h && p.bytes - h < width * p.group_size) return true;
  return false;
}

// "f32=1.2e12,f64=6e11" → per-dtype rates; an mdtp::Error naming the item otherwise.
std::map<DType, double> declared_peaks(const std::vector<std::string>& items) {
  std::map<DType, double> peaks;
  for (const std::string& item : items) {
    const std::size_t eq = item.find('=');
    require(eq != std::string::npos, "--peak-flops: expected DTYPE=FLOP/S items like f32=1.5e12; got '", item, "'");
    char* end = nullptr;
    const std::string value = item.substr(eq + 1);
    const double rate = std::strtod(value.c_str(), &end);
    require(!value.empty() && end == value.c_str() + value.size() && rate > 0 && std::isfinite(rate),
            "--peak-flops: the rate of '", item, "' must be a positive number of flop/s");
    peaks[parse_dtype(item.substr(0, eq))] = rate;
  }
  return peaks;
}

struct Occupancy {
  NodeOccupancy node;
  double oversubscription = 1.0;  // the largest over ranks
  bool oversubscribed() const { return oversubscription > 1.0; }
};

MeshConfig calibration_mesh(const CalibrateOptions& o, int world) {
  MeshConfig c;
  c.world = world;
  c.tp = o.tp.value_or(world % 2 == 0 && world >= 4 ? world / 2 : world);
  c.tp_mode = o.tp_mode;
  c.tp_depth = o.tp_depth;
  c.ranks_per_node = o.ranks_per_node;
  Topology check(c);  // every rank refuses a bad mesh alike, before any collective
  return c;
}

// The refusal comes before the results file is touched: a refused run writes nothing.
Occupancy refuse_oversubscribed(bool allowed) {
  Occupancy o;
  o.node = measure_node_occupancy(MPI_COMM_WORLD);
  o.oversubscription = run::mean_max_over_ranks(o.node.oversubscription(), MPI_COMM_WORLD, WaitPolicy::polite).max;
  require(!o.oversubscribed() || allowed, "refusing to calibrate oversubscribed: ", o.node.local_ranks,
          " ranks share ", o.node.cores, " core(s) on a node (oversubscription ", o.oversubscription,
          "), so the times would measure the OS scheduler, not the links. Run at most one rank per core, or pass "
          "--allow-oversubscribed to run anyway with every output flagged");
  return o;
}

void print_header(const Mesh& mesh, const calibrate::SweepSettings& sweep, const Occupancy& occupancy, int world) {
  fmt::print("mdtp calibrate: {} ranks ({} on {} cores, oversubscription {:.2g}), wait policy {}, mesh tp={} dp={}\n",
             world, occupancy.node.local_ranks, occupancy.node.cores, occupancy.oversubscription,
             wait_policy_name(mesh.wait_policy()), mesh.topology().tp(), mesh.topology().dp());
  if (occupancy.oversubscribed())
    fmt::print("WARNING: OVERSUBSCRIBED (--allow-oversubscribed): these times measure the scheduler; the fit is "
               "flagged in the results file and must not be used for predictions elsewhere\n");
  fmt::print("groups swept: {} (one-rank groups and repeats of the same ranks are skipped)\n",
             fmt::join(calibrate::swept_groups(sweep, mesh), " "));
  fmt::print("\n{:<8} {:>3} {:<15} {:>12} {:>6} {:>12} {:>12} {:>10} {:>10}  {}\n", "group", "n", "op", "bytes",
             "iters", "mean us", "max us", "algbw GB/s", "busbw GB/s", "check");
}

void print_point(const calibrate::SweepPoint& p) {
  fmt::print("{:<8} {:>3} {:<15} {:>12} {:>6} {:>12.2f} {:>12.2f} {:>10.3f} {:>10.3f}  {}\n", p.group, p.group_size,
             collective_name(p.op), p.bytes, p.iterations, p.seconds_mean * 1e6, p.seconds_max * 1e6, p.algbw / 1e9,
             p.busbw / 1e9, p.correct ? "ok" : "WRONG");
  std::fflush(stdout);
}

Attributes run_attributes(const Mesh& mesh, const CalibrateOptions& o, const std::string& command_line,
                          const Occupancy& occupancy, bool all_correct) {
  const calibrate::SweepSettings& sweep = o.sweep;
  Attributes a = run::collect_provenance(mesh, MPI_COMM_WORLD, {command_line, "", dtype_name(sweep.dtype), "host"});
  a["allow_oversubscribed"] = static_cast<std::int64_t>(o.allow_oversubscribed ? 1 : 0);
  a["sweep_min_bytes"] = sweep.min_bytes;
  a["sweep_max_bytes"] = sweep.max_bytes;
  a["sweep_factor"] = static_cast<std::int64_t>(sweep.factor);
  a["sweep_warmup"] = static_cast<std::int64_t>(sweep.warmup);
  a["sweep_iters"] = static_cast<std::int64_t>(sweep.iterations);
  a["gemm_size"] = o.gemm_size;
  a["sync_timing"] = static_cast<std::int64_t>(sweep.sync_timing ? 1 : 0);
  a["held_out_sizes"] = static_cast<std::int64_t>(o.hold_out.size());
  a["cache_flush_bytes"] = sweep.flush_bytes;
  a["all_correct"] = static_cast<std::int64_t>(all_correct ? 1 : 0);
  if (occupancy.oversubscribed()) a["warning"] = std::string("OVERSUBSCRIBED: times measure the OS scheduler");
  return a;
}

int run_calibrate(CalibrateOptions o, const std::string& command_line) {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  require(world >= 2, "mdtp calibrate measures links between ranks: run it under mpiexec with at least 2 ranks; got ",
          world);
  const MeshConfig config = calibration_mesh(o, world);
  const std::map<DType, double> peaks = declared_peaks(o.peak_flops);  // refused before any collective
  // A calibration to predict with is read before any collective, so a bad file fails every rank alike.
  std::optional<calibrate::LinkParameters> predictor;
  require(o.predict_with.empty() || o.hold_out.empty(),
          "--predict-with and --hold-out both name what predicts the points; give one of them");
  if (!o.predict_with.empty()) predictor = calibrate::load_calibration(o.predict_with);
  const Occupancy occupancy = refuse_oversubscribed(o.allow_oversubscribed);

  CommLedger ledger;
  Mesh mesh(config, MPI_COMM_WORLD, ledger);
  o.sweep.sync_timing = o.sweep.sync_timing || o.sync_timing || sync_timing_from_environment();
  if (!o.hold_out.empty()) o.sweep.sizes = sizes_with_hold_out(o.sweep, o.hold_out);
  if (o.cold_cache) {  // twice the last-level cache written per rank evicts any earlier buffer
    const std::vector<std::int64_t> l3 = calibrate::cache_knees(1);
    require(o.sweep.sync_timing, "--cold-cache times each call alone and needs --sync-timing");
    o.sweep.flush_bytes = l3.empty() ? (64ll << 20) : 2 * l3.back();
  }
  calibrate::validate_sweep(o.sweep, mesh);
  run::ResultsSink sink(o.out, MPI_COMM_WORLD);
  if (rank == 0) print_header(mesh, o.sweep, occupancy, world);

  const std::vector<calibrate::SweepPoint> points = calibrate::run_sweep(mesh, o.sweep, MPI_COMM_WORLD, print_point);
  bool all_correct = true;
  for (const auto& p : points) all_correct = all_correct && p.correct;
  const std::vector<calibrate::GemmRate> gemm = calibrate::measure_gemm_rates(o.gemm_size, mesh, MPI_COMM_WORLD);
  std::vector<std::int64_t> knees = o.cache_knees.empty() ? calibrate::cache_knees(occupancy.node.local_ranks) : o.cache_knees;
  knees.erase(std::remove(knees.begin(), knees.end(), 0), knees.end());
  std::vector<calibrate::SweepPoint> fitted, held;
  for (const auto& p : points) (held_out(p, o.hold_out) ? held : fitted).push_back(p);
  const calibrate::CalibrationResult fit = calibrate::fit_calibration(fitted, gemm, {}, knees);
  if (!held.empty()) {  // the held-out points, predicted by the fit that never saw them
    calibrate::LinkParameters own;
    own.model.calibration = fit.calibration;
    own.source = "this run's fit (held-out sizes excluded from it)";
    own.calibrated = true;
    predictor = own;
  }

  std::optional<cost::Cluster> cluster;
  if (!o.cluster_out.empty()) {
    const calibrate::HostMemory memory = calibrate::measure_host_memory(MPI_COMM_WORLD, occupancy.node.local_ranks);
    cluster = calibrate::calibrated_cluster(fit, o.cluster_name, occupancy.node.local_ranks, memory, peaks);
  }
  Attributes attributes = run_attributes(mesh, o, command_line, occupancy, all_correct);
  attributes["cache_knees_bytes"] = fmt::format("{}", fmt::join(knees, ","));
  std::map<std::string, Table> tables = calibrate::calibrate_run_tables(points, fit);
  std::string prediction;
  if (predictor) {
    const std::vector<calibrate::SweepPoint>& predicted = held.empty() ? points : held;
    tables.emplace("prediction", calibrate::prediction_table(predicted, predictor->model));
    attributes["predicted_with"] = predictor->source;
    prediction = calibrate::describe_prediction(predicted, predictor->model, predictor->source);
  }
  const std::string path = sink.append_run("calibrate", attributes, tables);
  if (rank == 0) {
    fmt::print("\n{}\n", calibrate::describe_fit(fit));
    fmt::print("cache knees: {} bytes{}\n", knees.empty() ? std::string("none") : fmt::format("{}", fmt::join(knees, ", ")),
               knees.empty() ? "" : " (fits cut there: cache, partly DRAM, DRAM)");
    if (!prediction.empty()) fmt::print("\n{}\n", prediction);
    fmt::print("written: {}:{}{}\n", sink.path(), path,
               occupancy.oversubscribed() ? "   (flagged OVERSUBSCRIBED)" : "");
    if (!all_correct) fmt::print("mdtp calibrate: FAILED: some collective results were wrong (check column)\n");
  }
  if (cluster) {
    run::run_on_root(MPI_COMM_WORLD, [&] { write_text_atomically(o.cluster_out, cost::cluster_json(*cluster)); });
    if (rank == 0)
      fmt::print("cluster file: {} ({} per node; GEMM f32 {:.1f} GFLOP/s, memory copy {:.1f} GB/s per rank){}\n",
                 o.cluster_out, cluster->gpus_per_node, cluster->gemm_rate(DType::f32) / 1e9,
                 cluster->stream_bandwidth() / 1e9, occupancy.oversubscribed() ? "   (OVERSUBSCRIBED: do not trust)" : "");
  }
  return all_correct ? 0 : 1;
}

}  // namespace

Command add_calibrate(CLI::App& root) {
  auto o = std::make_shared<CalibrateOptions>();
  calibrate::SweepSettings& sweep = o->sweep;
  CLI::App* app = add_command(root, "calibrate", "(MPI) sweep the collectives and fit the alpha-beta link parameters");
  app->footer(
      "Run under mpiexec (mpiexec -n N mdtp calibrate): nccl-tests-style sweeps of the collectives on the mesh's\n"
      "groups, the alpha-beta fits and the GEMM rate, appended to an HDF5 results file for `mdtp cost` and\n"
      "`mdtp bench`.  An oversubscribed run (more ranks than cores) is refused.");
  add(*app, "--tp", o->tp, "TP size of the mesh whose groups are swept (default N/2 when N is even and >= 4, else N)");
  add_tp_mode(*app, "--tp-mode", o->tp_mode, "the TP sub-grid");
  add(*app, "--tp-depth", o->tp_depth, "2.5d depth d");
  add(*app, "--ranks-per-node", o->ranks_per_node, "ranks per node, in rank order (0: one node)");
  add(*app, "--groups", sweep.groups, "mesh groups to sweep (one-rank groups are skipped)")
      ->type_name("LIST")
      ->default_str("world,tp,dp");
  add_parsed_list(*app, "--ops", sweep.ops, calibrate::parse_collective,
                  "all_reduce,all_gather,reduce_scatter,broadcast,reduce, or all");
  app->add_option("--min-bytes", sweep.min_bytes, "smallest message, bytes (suffixes K, M, G)")
      ->transform(byte_count())
      ->type_name("BYTES")
      ->default_str("8");
  app->add_option("--max-bytes", sweep.max_bytes, "largest message, bytes (suffixes K, M, G)")
      ->transform(byte_count())
      ->type_name("BYTES")
      ->default_str("64M");
  add(*app, "--factor", sweep.factor, "sizes min, min*factor, ... <= max")->check(at_least(2));
  add(*app, "--warmup", sweep.warmup, "untimed calls per size")->check(at_least(0));
  add(*app, "--iters", sweep.iterations, "timed calls per size (fewer above 1 MiB)")->check(at_least(1));
  add_dtype(*app, "--dtype", sweep.dtype, "element type of the messages");
  add(*app, "--gemm-size", o->gemm_size, "side of the square GEMM timed for the compute model")
      ->check(between(16, 8192));
  add(*app, "--out", o->out, "results file, created or appended to")->type_name("FILE.h5");
  add(*app, "--cluster-out", o->cluster_out, "also write this machine as a cluster file for mdtp plan / mdtp cost")
      ->type_name("FILE.json");
  add(*app, "--cluster-name", o->cluster_name, "the cluster file's name");
  add(*app, "--peak-flops", o->peak_flops, "declared peak GEMM rates per rank (default: the measured ones)")
      ->type_name("DTYPE=FLOPS,...");
  add(*app, "--sizes", sweep.sizes, "explicit message sizes instead of --min-bytes/--factor/--max-bytes")
      ->transform(byte_count())
      ->type_name("BYTES,...");
  add(*app, "--hold-out", o->hold_out,
      "sizes swept with the others but left out of the fit; the fit's prediction for each is printed and recorded "
      "(table prediction) beside the measured time")
      ->transform(byte_count())
      ->type_name("BYTES,...");
  app->add_flag("--sync-timing", o->sync_timing,
                "time each call alone after a barrier on its group (the transfer; median over calls), as the "
                "ledger's sync timing does (also MDTP_SYNC_TIMING=1)");
  app->add_flag("--cold-cache", o->cold_cache,
                "with --sync-timing: evict the caches before each timed call (each rank writes 2x the L3), as a "
                "layer's collective finds them after its GEMMs");
  add(*app, "--cache-knees", o->cache_knees,
      "cut the fits at these message sizes in bytes (default L3 / (2 * ranks on the node) and L3; 0: none)")
      ->check(at_least(0))
      ->type_name("BYTES,...");
  add(*app, "--predict-with", o->predict_with,
      "also print and record each point's time predicted by this calibration (FILE.h5[:/runs/NNNN-calibrate]), "
      "with the ratio measured/predicted")
      ->type_name("FILE");
  app->add_flag("--allow-oversubscribed", o->allow_oversubscribed,
                "run even with more ranks than cores (every output flagged)");
  return {app, true, [o](const std::string& command_line) { return run_calibrate(*o, command_line); }};
}

}  // namespace mdtp::cli
