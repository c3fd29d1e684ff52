// `mdtp cost`: the theoretical model of one configuration, computed without MPI — the exact
// collective list with α-β times, GEMM time, memory per rank and the published asymptotic row
// (src/cost/report.hpp); or the ZeRO table (--zero), or the pipeline bubble (--pipeline).
#include <cstdio>
#include <iostream>
#include <sstream>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "core/error.hpp"
#include "calibrate/calibration_io.hpp"
#include "cost/pipeline_bubble.hpp"
#include "cost/report.hpp"
#include "cost/zero.hpp"

namespace mdtp::cli {

namespace {

constexpr const char* kUsage =
    "usage: mdtp cost --mode none|1d|1d-sp|2d|2.5d|3d --tp T [--world W] [--tp-depth D] [--pp P]\n"
    "                 [--layer linear|layernorm|mlp] --batch B --seq S --hidden H [--ffn F] [--layers L]\n"
    "                 [--dtype f32|f64] [--keep-gathered-3d] [--ranks-per-node N] [--dp-grad-sync]\n"
    "                 [--alpha-intra s --beta-intra s/B --alpha-inter s --beta-inter s/B | --calibration FILE.h5]\n"
    "                 [--calibration-run NNNN-calibrate] [--gemm-flops F] [--mpich-allreduce]\n"
    "                 [--optimizer-bytes K] [--json]\n"
    "       mdtp cost --zero --params PSI --dp N [--param-bytes 2 --grad-bytes 2 --optimizer-bytes 12] [--json]\n"
    "       mdtp cost --pipeline --pp P --microbatches M [--chunks V] [--json]\n"
    "The model of one layer (x L) per rank: every collective (phase, group, op) with bytes, bus bytes and\n"
    "alpha-beta seconds, GEMM time, memory, and the published asymptotic row (not normalised consistently).\n"
    "--world defaults to tp*pp (dp = world/(tp*pp)); --ffn to 4*hidden; --dp-grad-sync adds the dp all-reduce\n"
    "of every gradient; --mpich-allreduce models MPICH's Rabenseifner instead of the ring for large all-reduce.\n";

int int_option(const Args& args, const std::string& option, long long fallback) {
  long long v = args.get_int(option, fallback);
  require(v >= -(1LL << 30) && v <= (1LL << 30), "option ", option, " is out of range; got ", v);
  return static_cast<int>(v);
}

std::int64_t required_int(const Args& args, const std::string& option) {
  require(args.has(option), "mdtp cost needs ", option);
  return args.get_int(option, 0);
}

std::string gb(double bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", bytes / 1e9);
  return buffer;
}

int run_zero(const Args& args, bool json) {
  require(args.has("--params") && args.has("--dp"), "mdtp cost --zero needs --params PSI and --dp N");
  cost::ZeroConfig c;
  c.parameters = args.get_double("--params", 0.0);
  c.data_parallel = int_option(args, "--dp", 1);
  c.param_bytes = args.get_double("--param-bytes", c.param_bytes);
  c.grad_bytes = args.get_double("--grad-bytes", c.grad_bytes);
  c.optimizer_bytes = args.get_double("--optimizer-bytes", c.optimizer_bytes);
  const auto stages = cost::zero_costs(c);
  std::ostringstream os;
  os.precision(15);
  if (json) {
    os << "{\"parameters\": " << c.parameters << ", \"dp\": " << c.data_parallel << ", \"param_bytes\": " << c.param_bytes
       << ", \"grad_bytes\": " << c.grad_bytes << ", \"optimizer_bytes\": " << c.optimizer_bytes << ", \"stages\": [";
    for (std::size_t i = 0; i < stages.size(); ++i) {
      const auto& s = stages[i];
      os << (i ? ", " : "") << "{\"stage\": " << s.stage << ", \"name\": \"" << s.name << "\", \"memory_bytes\": "
         << s.memory_bytes << ", \"comm_elements\": " << s.comm_elements << ", \"comm_bytes\": " << s.comm_bytes << "}";
    }
    os << "]}\n";
  } else {
    os << "ZeRO over N_d=" << c.data_parallel << " ranks, Psi=" << c.parameters << " parameters, bytes per parameter "
       << c.param_bytes << " / gradient " << c.grad_bytes << " / optimizer K=" << c.optimizer_bytes
       << " (1 GB = 1e9 B)\n";
    char line[256];
    std::snprintf(line, sizeof line, "%-6s %-18s %14s %-26s %12s %12s  %s\n", "stage", "partitions", "memory/rank GB",
                  "memory formula", "comm (Psi)", "comm GB", "communication per step");
    os << line;
    for (const auto& s : stages) {
      std::snprintf(line, sizeof line, "%-6d %-18s %14s %-26s %12.0f %12s  %s\n", s.stage, s.name.c_str(),
                    gb(s.memory_bytes).c_str(), s.memory_formula.c_str(), s.comm_elements / c.parameters,
                    gb(s.comm_bytes).c_str(), s.comm_formula.c_str());
      os << line;
    }
  }
  std::cout << os.str();
  return 0;
}

int run_pipeline(const Args& args, bool json) {
  require(args.has("--pp") && args.has("--microbatches"), "mdtp cost --pipeline needs --pp P and --microbatches M");
  cost::PipelineConfig base;
  base.stages = int_option(args, "--pp", 1);
  base.microbatches = int_option(args, "--microbatches", 1);
  const int chunks = int_option(args, "--chunks", 1);
  std::vector<cost::PipelineConfig> configs;
  for (auto schedule : {cost::PipelineSchedule::gpipe, cost::PipelineSchedule::one_f_one_b}) {
    cost::PipelineConfig c = base;
    c.schedule = schedule;
    configs.push_back(c);
  }
  if (chunks > 1 || args.has("--chunks")) {
    cost::PipelineConfig c = base;
    c.schedule = cost::PipelineSchedule::interleaved;
    c.chunks = chunks;
    configs.push_back(c);
  }
  std::ostringstream os;
  os.precision(15);
  if (json) os << "{\"pp\": " << base.stages << ", \"microbatches\": " << base.microbatches << ", \"schedules\": [";
  else os << "pipeline: p=" << base.stages << " stages, m=" << base.microbatches << " micro-batches\n";
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const auto& c = configs[i];
    const auto in_flight = cost::peak_in_flight(c);
    std::ostringstream flight;
    for (std::size_t r = 0; r < in_flight.size(); ++r) flight << (r ? ", " : "") << in_flight[r];
    const char* formula = c.schedule == cost::PipelineSchedule::interleaved ? "(p-1)/(v*m)" : "(p-1)/m";
    if (json) {
      os << (i ? ", " : "") << "{\"schedule\": \"" << cost::pipeline_schedule_name(c.schedule) << "\", \"chunks\": "
         << c.chunks << ", \"bubble_over_ideal\": " << cost::bubble_over_ideal(c) << ", \"bubble_fraction_of_total\": "
         << cost::bubble_fraction_of_total(c) << ", \"peak_in_flight_per_stage\": [" << flight.str() << "]}";
    } else {
      char line[256];
      std::snprintf(line, sizeof line, "  %-12s v=%d  bubble %s = %.4f of ideal compute, %.4f of the step;", 
                    cost::pipeline_schedule_name(c.schedule), c.chunks, formula, cost::bubble_over_ideal(c),
                    cost::bubble_fraction_of_total(c));
      os << line << " peak in flight per stage: " << flight.str() << "\n";
    }
  }
  if (json) os << "]}\n";
  std::cout << os.str();
  return 0;
}

int run_model(const Args& args, bool json) {
  cost::Workload w;
  require(args.has("--mode"), "mdtp cost needs --mode (", tp_mode_list(), ")");
  w.mode = parse_tp_mode(args.get("--mode", ""));
  w.mesh.tp = int_option(args, "--tp", 1);
  w.mesh.pp = int_option(args, "--pp", 1);
  w.mesh.tp_mode = w.mode;
  w.mesh.tp_depth = int_option(args, "--tp-depth", 1);
  w.mesh.world = int_option(args, "--world", static_cast<long long>(w.mesh.tp) * w.mesh.pp);
  w.mesh.ranks_per_node = int_option(args, "--ranks-per-node", 0);
  w.layer = args.get("--layer", "mlp");
  w.rows = required_int(args, "--batch") * required_int(args, "--seq");
  w.hidden = required_int(args, "--hidden");
  w.ffn_hidden = args.get_int("--ffn", 4 * w.hidden);
  w.dtype = parse_dtype(args.get("--dtype", "f32"));
  w.options.keep_gathered_3d = args.flag("--keep-gathered-3d");
  if (args.flag("--dp-grad-sync")) w.data_parallel_group = "dp";
  const int layers = int_option(args, "--layers", 1);

  cost::TimeModel model;
  std::string source = "defaults";
  const bool given_links = args.has("--alpha-intra") || args.has("--beta-intra") || args.has("--alpha-inter") ||
                           args.has("--beta-inter");
  if (args.has("--calibration")) {
    require(!given_links, "give either --calibration or the --alpha-*/--beta-* link parameters, not both");
    const std::string run = args.get("--calibration-run", "");
    const std::string spec = args.get("--calibration", "") + (run.empty() ? "" : ":/runs/" + run);
    model.calibration = calibrate::load_calibration(spec).model.calibration;
    source = "calibration " + args.get("--calibration", "");
  }
  if (given_links) {
    auto& intra = model.links[LinkClass::intra_node];
    auto& inter = model.links[LinkClass::inter_node];
    intra.alpha = args.get_double("--alpha-intra", intra.alpha);
    intra.beta = args.get_double("--beta-intra", intra.beta);
    inter.alpha = args.get_double("--alpha-inter", inter.alpha);
    inter.beta = args.get_double("--beta-inter", inter.beta);
    source = "given";
  }
  if (args.has("--gemm-flops")) model.gemm_flops[w.dtype] = args.get_double("--gemm-flops", 0.0);
  model.algorithms.ring_all_reduce = !args.flag("--mpich-allreduce");

  const cost::CostReport report =
      cost::build_cost_report(w, model, layers, args.get_double("--optimizer-bytes", 0.0), source);
  std::cout << (json ? cost::report_json(report) : cost::report_text(report));
  return 0;
}

}  // namespace

int run_cost(const std::vector<std::string>& argv) {
  Args args(argv,
            {"--mode", "--world", "--tp", "--tp-depth", "--pp", "--layer", "--batch", "--seq", "--hidden", "--ffn",
             "--layers", "--dtype", "--ranks-per-node", "--alpha-intra", "--beta-intra", "--alpha-inter", "--beta-inter",
             "--calibration", "--calibration-run", "--gemm-flops", "--optimizer-bytes", "--params", "--dp",
             "--param-bytes", "--grad-bytes", "--microbatches", "--chunks"},
            {"--json", "--help", "--keep-gathered-3d", "--dp-grad-sync", "--mpich-allreduce", "--zero", "--pipeline"});
  if (args.flag("--help")) {
    std::cout << kUsage;
    return 0;
  }
  const bool json = args.flag("--json");
  require(!(args.flag("--zero") && args.flag("--pipeline")), "give --zero or --pipeline, not both");
  if (args.flag("--zero")) return run_zero(args, json);
  if (args.flag("--pipeline")) return run_pipeline(args, json);
  return run_model(args, json);
}

}  // namespace mdtp::cli
