// mdtp: the command-line entry point.  The command line is parsed (CLI11) before MPI starts, so
// `--help` works without mpiexec and a bad option is refused by every rank alike, before any
// collective.  Errors — of the command line and mdtp::Error raised while running — are printed
// as one line, `mdtp <command>: error: ...`, on every rank that raises them, and exit with
// status 2; no stack dump.
#include <mpi.h>

#include <cstdio>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "core/error.hpp"

namespace {

using mdtp::cli::Command;

constexpr int kUsageError = 2;

// The rank mpiexec gave this process, or -1 outside mpiexec: help is printed by rank 0 only.
int launched_rank() {
  for (const char* name : {"PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"})
    if (const char* value = std::getenv(name); value && *value) return std::atoi(value);
  return -1;
}

std::string joined(int argc, char** argv, int from) {
  std::string s = "mdtp";
  for (int i = from; i < argc; ++i) s += std::string(" ") + argv[i];
  return s;
}

// CLI11's messages for an argument it did not expect and for a missing value, said plainly.  An
// unknown option is named first, whatever CLI11 found wrong: a misspelt --world is the cause of
// "--world is required".
std::string parse_error_message(const CLI::ParseError& e, const CLI::App& app) {
  const std::vector<std::string> extras = app.remaining();
  if (!extras.empty()) {
    const std::string help = app.get_parent() ? "mdtp " + app.get_name() + " --help" : "mdtp --help";
    const std::string& first = extras.front();
    if (first.size() > 1 && first[0] == '-')
      return "unknown option '" + first.substr(0, first.find('=')) + "' (" + help + " lists the options)";
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
    // Every rank validated the same configuration, so every rank is here: finalize cleanly.
    print_error_line("mdtp " + command.app->get_name(), e.what());
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
    const std::string who = chosen ? "mdtp " + chosen->app->get_name() : std::string("mdtp");
    print_error_line(who, parse_error_message(e, chosen ? *chosen->app : root));
    return kUsageError;
  }
  if (chosen == nullptr) {  // no command, only options of mdtp itself (there are none but --help, --version)
    std::cerr << root.help();
    return kUsageError;
  }
  return run(*chosen, joined(argc, argv, 1));
}
