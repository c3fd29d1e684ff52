#pragma once
// The `mdtp` subcommands, one per cli/<name>.cpp: each adds its CLI11 subcommand (options, help)
// to the root app and returns what runs it (cli/options.hpp).  Those that need MPI say so; main
// initialises MPI for them only, after the command line has parsed.
#include <vector>

#include "cli/options.hpp"

namespace mdtp::cli {

Command add_mesh(CLI::App& root);
Command add_smoke(CLI::App& root);
Command add_train(CLI::App& root);
Command add_cost(CLI::App& root);
Command add_calibrate(CLI::App& root);
Command add_bench(CLI::App& root);
Command add_experiment(CLI::App& root);
Command add_plan(CLI::App& root);
Command add_schedule(CLI::App& root);
Command add_simulate(CLI::App& root);
Command add_collectives(CLI::App& root);

// Every subcommand, in the order `mdtp --help` lists them.
inline std::vector<Command> add_commands(CLI::App& root) {
  return {add_mesh(root),      add_smoke(root), add_train(root),      add_cost(root),
          add_plan(root),      add_schedule(root), add_calibrate(root), add_bench(root), add_experiment(root),
          add_collectives(root), add_simulate(root)};
}

}  // namespace mdtp::cli
