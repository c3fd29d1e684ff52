// mdtp: the command-line entry point.  Errors (mdtp::Error) are printed as one clear line on
// every rank that raises them and exit with status 2; no stack dump.
#include <mpi.h>

#include <cstring>
#include <iostream>

#include "cli/commands.hpp"
#include "core/error.hpp"

namespace {

const mdtp::cli::Command kCommands[] = {
    {"mesh", "print the rank groups of a mesh (no MPI needed)", false, mdtp::cli::run_mesh},
    {"smoke", "run a collective on every mesh group under mpiexec and check it", true, mdtp::cli::run_smoke},
    {"train", "train the GPT model under mpiexec in any tensor-parallel mode", true, mdtp::cli::run_train},
    {"cost", "print the cost model of a configuration: collectives, times, memory (no MPI needed)", false, mdtp::cli::run_cost},
    {"calibrate", "sweep the collectives under mpiexec and fit the alpha-beta link parameters", true,
     mdtp::cli::run_calibrate},
    {"bench", "measure a layer in each TP mode under mpiexec, beside the cost model", true, mdtp::cli::run_bench},
    {"experiment", "the main job: calibrate, compare the TP modes on 8 ranks, report (runs mpiexec)", false,
     mdtp::cli::run_experiment},
};

void usage() {
  std::cerr << "usage: mdtp <command> [options]\n\ncommands:\n";
  for (const auto& c : kCommands) std::cerr << "  " << c.name << "\t" << c.summary << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    usage();
    return argc < 2 ? 2 : 0;
  }
  for (const auto& command : kCommands) {
    if (std::strcmp(argv[1], command.name) != 0) continue;
    std::vector<std::string> args(argv + 2, argv + argc);
    bool mpi = command.needs_mpi;
    if (mpi) MPI_Init(&argc, &argv);
    int status = 0;
    try {
      status = command.run(args);
    } catch (const mdtp::Error& e) {
      int rank = 0;
      if (mpi) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      std::cerr << "mdtp " << command.name << ": error: " << e.what() << "\n";
      status = 2;
      if (mpi) {
        // Every rank validated the same configuration, so every rank is here: finalize cleanly.
        MPI_Finalize();
        return status;
      }
    }
    if (mpi) MPI_Finalize();
    return status;
  }
  std::cerr << "mdtp: unknown command '" << argv[1] << "'\n";
  usage();
  return 2;
}
