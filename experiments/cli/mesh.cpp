// `mdtp mesh`: prints the rank groups of a mesh, computed without MPI, so a layout can be checked
// (and compared with Megatron's) before any job is launched.
#include <iostream>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "core/error.hpp"
#include "mesh/topology.hpp"

namespace mdtp::cli {

namespace {

// Narrows an option to int with a message naming it, instead of silently wrapping.
int int_option(const Args& args, const std::string& option, long long fallback) {
  long long v = args.get_int(option, fallback);
  require(v >= -(1LL << 30) && v <= (1LL << 30), "option ", option, " is out of range; got ", v);
  return static_cast<int>(v);
}

}  // namespace

int run_mesh(const std::vector<std::string>& argv) {
  Args args(argv, {"--world", "--tp", "--pp", "--cp", "--order", "--tp-mode", "--tp-depth", "--ranks-per-node"},
            {"--json", "--help"});
  if (args.flag("--help")) {
    std::cout << "usage: mdtp mesh --world W [--tp T] [--pp P] [--cp C] [--order tp-cp-dp-pp]\n"
                 "                 [--tp-mode 1d|1d-sp|2d|2.5d|3d] [--tp-depth D] [--ranks-per-node N] [--json]\n"
                 "Prints the rank groups (Megatron RankGenerator order) and the TP mode's sub-groups.\n";
    return 0;
  }
  require(args.has("--world"), "mdtp mesh needs --world W (the number of ranks)");
  MeshConfig config;
  config.world = int_option(args, "--world", 1);
  config.tp = int_option(args, "--tp", 1);
  config.pp = int_option(args, "--pp", 1);
  config.cp = int_option(args, "--cp", 1);
  config.order = args.get("--order", config.order);
  config.tp_mode = parse_tp_mode(args.get("--tp-mode", tp_mode_name(config.tp_mode)));
  config.tp_depth = int_option(args, "--tp-depth", 1);
  config.ranks_per_node = int_option(args, "--ranks-per-node", 0);

  Topology topology(config);
  std::cout << (args.flag("--json") ? topology.to_json() : topology.to_table());
  return 0;
}

}  // namespace mdtp::cli
