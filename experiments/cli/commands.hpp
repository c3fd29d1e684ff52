#pragma once
// One function per `mdtp` subcommand; each lives in its own cli/<name>.cpp.  `args` excludes the
// program and subcommand names.  Commands that need MPI initialise it themselves (mesh does not).
#include <string>
#include <vector>

namespace mdtp::cli {

struct Command {
  const char* name;
  const char* summary;
  bool needs_mpi;
  int (*run)(const std::vector<std::string>& args);
};

int run_mesh(const std::vector<std::string>& args);
int run_smoke(const std::vector<std::string>& args);
int run_train(const std::vector<std::string>& args);
int run_cost(const std::vector<std::string>& args);
int run_calibrate(const std::vector<std::string>& args);
int run_bench(const std::vector<std::string>& args);
int run_experiment(const std::vector<std::string>& args);

}  // namespace mdtp::cli
