// mdtp: the command-line entry point.  The command line is parsed (CLI11) before MPI starts, so
// `--help` works without mpiexec and a bad option is refused by every rank alike, before any
// collective.  Errors — of the command line and mdtp::Error raised while running — are one line,
// `mdtp <command>: error: ...`, printed once for the job (by rank 0, with "(on all N ranks)" when
// every rank raised the same), and exit with status 2; no stack dump.  A rank whose error differs
// from rank 0's prints its own line too, naming its rank, so nothing is hidden.
#include <mpi.h>
#ifdef MDTP_SMPI
#include <simgrid/actor.h>
#endif

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <thread>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "comm/run_clock.hpp"
#include "core/error.hpp"
#include "run/simulation_context.hpp"

namespace {

using mdtp::cli::Command;

constexpr int kUsageError = 2;

// The rank mpiexec gave this process, or -1 outside mpiexec: help is printed by rank 0 only.
int launched_rank() {
#ifdef MDTP_SMPI
  // Under SMPI every rank is a SimGrid actor of one process, named by its rank ("0", "1", ...).
  if (const char* name = sg_actor_self_get_name(); name && *name) return std::atoi(name);
#endif
  for (const char* name : {"PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"})
    if (const char* value = std::getenv(name); value && *value) return std::atoi(value);
  return -1;
}

std::string joined(int argc, char** argv, int from) {
  std::string s = "mdtp";
  for (int i = from; i < argc; ++i) s += std::string(" ") + argv[i];
  return s;
}

// Levenshtein distance, for the near match of a misspelt option.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The command's option nearest to a misspelt one (within a third of its length), or "".
std::string near_match(const CLI::App& app, const std::string& given) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, given.size() / 3) + 1;
  for (const CLI::Option* option : app.get_options()) {
    if (option->get_group().empty()) continue;  // hidden: the renamed spellings
    for (const std::string& name : option->get_lnames()) {
      const std::size_t d = edit_distance(given, "--" + name);
      if (d < best_distance) best_distance = d, best = "--" + name;
    }
  }
  return best;
}

// CLI11's messages for an argument it did not expect and for a missing value, said plainly.  An
// unknown option is named first, whatever CLI11 found wrong: a misspelt --world is the cause of
// "--world is required".
std::string parse_error_message(const CLI::ParseError& e, const CLI::App& app) {
  const std::vector<std::string> extras = app.remaining();
  if (!extras.empty()) {
    const std::string help = app.get_parent() ? "mdtp " + app.get_name() + " --help" : "mdtp --help";
    const std::string& first = extras.front();
    if (first.size() > 1 && first[0] == '-') {
      const std::string option = first.substr(0, first.find('='));
      const std::string near = near_match(app, option);
      return "unknown option '" + option + "'" + (near.empty() ? "" : "; did you mean " + near + "?") + " (" + help +
             " lists the options)";
    }
    return "unexpected argument '" + first + "' (" + help + ")";
  }
  const std::string message = e.what();
  const std::string missing = " missing";
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr && message.size() > missing.size() &&
      message.compare(message.size() - missing.size(), missing.size(), missing) == 0)
    return message.substr(0, message.find(':')) + ": needs a value";
  return message;
}

// One error line in one write: several ranks share stderr, and a line written piecewise can
// interleave with another rank's (tests count the lines).
void print_error_line(const std::string& who, const std::string& message) {
  const std::string line = who + ": error: " + message + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

// Under `mdtp simulate`, the status goes to the file it names (run/simulation_context.hpp):
// smpirun itself exits 0 after MPI_Abort.
void record_simulated_failure(int status) {
  if (!mdtp::simulated_build()) return;
  const char* path = std::getenv(mdtp::run::kSimulationFailureEnvironment);
  if (path == nullptr || *path == '\0') return;
  if (std::FILE* f = std::fopen(path, "w")) {
    std::fprintf(f, "%d\n", status);
    std::fclose(f);
  }
}

// An error raised while running under MPI, printed once for the job.  Every rank that raised one
// arrives here; whether all did is found with a non-blocking barrier (a rank still in a collective
// never completes it): then rank 0 prints the line once and any rank whose message differs prints
// its own; otherwise the rank prints its line and aborts the job, whose other ranks would wait.
void report_run_error(const std::string& who, const std::string& message) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Request barrier = MPI_REQUEST_NULL;
  MPI_Ibarrier(MPI_COMM_WORLD, &barrier);
  int everyone = 0;
#ifdef MDTP_SMPI
  // The simulated ranks are actors of one thread: a host sleep would hold every other rank off the
  // barrier, so wait in simulated time (sg_actor_sleep_for yields), up to 10 simulated seconds.
  for (int polls = 0; !everyone && polls < 5000; ++polls) {
    MPI_Test(&barrier, &everyone, MPI_STATUS_IGNORE);
    if (!everyone) sg_actor_sleep_for(2e-3);
  }
#else
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!everyone && std::chrono::steady_clock::now() < deadline) {
    MPI_Test(&barrier, &everyone, MPI_STATUS_IGNORE);
    if (!everyone) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
#endif
  if (!everyone) {
    print_error_line(who + " (rank " + std::to_string(rank) + ")", message);
    record_simulated_failure(kUsageError);
    MPI_Abort(MPI_COMM_WORLD, kUsageError);
  }
  unsigned long long mine = std::hash<std::string>{}(message), first = mine;
  MPI_Bcast(&first, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  int same = mine == first ? 1 : 0, all_same = 0;
  MPI_Allreduce(&same, &all_same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0)
    print_error_line(who, message + (size > 1 && all_same ? " (on all " + std::to_string(size) + " ranks)" : ""));
  else if (!same)
    print_error_line(who + " (rank " + std::to_string(rank) + ")", message);
}

int run(const Command& command, const std::string& command_line) {
  if (!command.needs_mpi) {
    try {
      return command.run(command_line);
    } catch (const mdtp::Error& e) {
      print_error_line("mdtp " + command.app->get_name(), e.what());
      return kUsageError;
    }
  }
  // MPI_THREAD_MULTIPLE: the collective watchdog's thread may call MPI_Abort while this thread
  // is blocked in MPI_Wait (comm/collective_watchdog.hpp).
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  int status = 0;
  try {
    status = command.run(command_line);
  } catch (const mdtp::Error& e) {
    // Every rank validated the same configuration, so every rank is normally here.
    report_run_error("mdtp " + command.app->get_name(), e.what());
    status = kUsageError;
  }
  MPI_Finalize();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App root("mdtp: multidimensional tensor parallelism, measured (1D, 1D-SP, 2D, 2.5D and 3D on one mesh)",
                "mdtp");
  root.set_version_flag("--version", mdtp::cli::version_line(), "Print the version and git commit, then exit");
  root.get_formatter()->column_width(36);
  root.footer("Run `mdtp <command> --help` for a command's options.  Commands marked (MPI) run under mpiexec.");
  const std::vector<Command> commands = mdtp::cli::add_commands(root);
  for (const auto& command : commands)
    if (command.needs_mpi) mdtp::cli::add_collective_timeout(*command.app);

  if (argc < 2) {
    std::cerr << root.help();
    return kUsageError;
  }
  // An unknown command is named as such (CLI11 would call it an unexpected argument).
  const std::string first = argv[1];
  const Command* chosen = nullptr;
  for (const auto& command : commands)
    if (command.app->get_name() == first) chosen = &command;
  if (chosen == nullptr && first[0] != '-') {
    std::string names;
    for (const auto& command : commands) names += (names.empty() ? "" : ", ") + command.app->get_name();
    if (launched_rank() <= 0)
      print_error_line("mdtp", "unknown command '" + first + "'; expected one of " + names + " (mdtp --help)");
    return kUsageError;
  }

  try {
    root.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    if (launched_rank() <= 0) std::cout << root.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    if (launched_rank() <= 0) std::cout << root.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::CallForVersion& e) {
    if (launched_rank() <= 0) std::cout << e.what() << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    // Every rank parsed the same command line: rank 0 (or the only process) says so, once.
    const std::string who = chosen ? "mdtp " + chosen->app->get_name() : std::string("mdtp");
    if (launched_rank() <= 0) print_error_line(who, parse_error_message(e, chosen ? *chosen->app : root));
    return kUsageError;
  }
  if (chosen == nullptr) {  // no command, only options of mdtp itself (there are none but --help, --version)
    std::cerr << root.help();
    return kUsageError;
  }
  return run(*chosen, joined(argc, argv, 1));
}
