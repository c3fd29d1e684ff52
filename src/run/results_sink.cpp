#include "run/results_sink.hpp"

#include <unistd.h>

#include <filesystem>

#include "comm/bookkeeping_collectives.hpp"
#include "run/rank_stats.hpp"
#include "core/error.hpp"
#include "spec/names.hpp"

namespace mdtp::run {
namespace {

// These calls are rare and short: the polite wait is right whatever the occupancy.
constexpr WaitPolicy kPolicy = WaitPolicy::polite;

// "" when the path can take results, else why not.
std::string check_destination(const std::string& path) {
  try {
    namespace fs = std::filesystem;
    if (fs::exists(path)) ResultsFile probe(path);  // refuses anything but an HDF5 file
    fs::path parent = fs::path(path).parent_path();
    if (parent.empty()) parent = ".";
    fs::create_directories(parent);  // an append writes a copy here and renames it over the file
    if (access(parent.c_str(), W_OK) != 0) return "cannot write results into directory '" + parent.string() + "'";
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace

ResultsSink::ResultsSink(std::string path, MPI_Comm world) : path_(std::move(path)), world_(world) {
  require(!path_.empty(), "--out needs a file name (e.g. results/bench.h5)");
  check_mpi(MPI_Comm_rank(world_, &rank_), "MPI_Comm_rank");
  // HDF5 locks a file opened for writing against its readers: every rank must have closed what
  // it read (a calibration kept in this same file) before rank 0 opens it.
  bookkeeping_barrier(world_, kPolicy, WaitLabel{group::world, "barrier (results file)", -1, nullptr});
  std::string problem = rank_ == 0 ? check_destination(path_) : "";
  problem = broadcast_string(problem, 0, world_, kPolicy);
  require(problem.empty(), "results file: ", problem);
}

std::string ResultsSink::append_run(const std::string& kind, const Attributes& attributes,
                                    const std::map<std::string, Table>& tables) {
  std::string outcome;  // "ok:<group>" or the error
  if (rank_ == 0) {
    try {
      ResultsFile file(path_);
      outcome = "ok:" + file.append_run(kind, attributes, tables);
    } catch (const std::exception& e) {
      outcome = e.what();
    }
  }
  outcome = broadcast_string(outcome, 0, world_, kPolicy);
  require(outcome.rfind("ok:", 0) == 0, "writing run '", kind, "' to ", path_, ": ", outcome);
  return outcome.substr(3);
}

}  // namespace mdtp::run
