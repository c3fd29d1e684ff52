// `mdtp mesh`: prints the rank groups of a mesh, computed without MPI, so a layout can be checked
// (and compared with Megatron's) before any job is launched.
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "mesh/topology.hpp"

namespace mdtp::cli {

Command add_mesh(CLI::App& root) {
  struct Options {
    MeshConfig config;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* app = add_command(root, "mesh", "print the rank groups of a mesh (no MPI needed)");
  app->footer(
      "Prints the rank groups of a mesh (Megatron RankGenerator order) and the TP mode's sub-groups, without MPI.");
  add(*app, "--world", o->config.world, "number of ranks W")->required()->default_str("");
  add(*app, "--tp", o->config.tp, "tensor-parallel size T");
  add(*app, "--pp", o->config.pp, "pipeline-parallel size P");
  add(*app, "--cp", o->config.cp, "context-parallel size C (dp = W / (T P C))");
  add(*app, "--order", o->config.order, "axes, fastest-varying first; missing size-1 axes are appended");
  add_tp_mode(*app, "--tp-mode", o->config.tp_mode, "the TP sub-grid");
  add(*app, "--tp-depth", o->config.tp_depth, "2.5d depth d");
  add(*app, "--ranks-per-node", o->config.ranks_per_node, "ranks per node, in rank order (0: one node)");
  app->add_flag("--json", o->json, "print JSON for tools instead of the table");
  return {app, false, [o](const std::string&) {
            const Topology topology(o->config);
            std::cout << (o->json ? topology.to_json() : topology.to_table());
            return 0;
          }};
}

}  // namespace mdtp::cli
