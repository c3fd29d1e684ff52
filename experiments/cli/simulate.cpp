// mdtp simulate: runs mdtp's own engines on a simulated cluster (SimGrid SMPI, docs/simulate.md).
//
//   mdtp simulate --cluster dgx-h100 --gpus 64 -- train --tp-mode 2d --tp 4 --pp 2 --zero 3 --steps 1
//
// It writes the platform of the cluster preset (simulate/platform.hpp) and its host file, then
// runs smpirun with the SMPI build of mdtp (configured with -DMDTP_SMPI=ON; by default
// BUILD-smpi/mdtp beside this program's BUILD/mdtp) on that platform, and exits with the simulated
// run's status.  The simulated
// ranks read what ran where from MDTP_SIMULATION (run/simulation_context.hpp).  Not an MPI
// program itself: everything is checked here, before smpirun starts.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/commands.hpp"
#include "core/blas_library.hpp"
#include "cost/cluster.hpp"
#include "io/output_path.hpp"
#include "run/simulation_context.hpp"
#include "simulate/platform.hpp"

namespace mdtp::cli {
namespace {

namespace fs = std::filesystem;

struct SimulateOptions {
  std::string cluster, platform, smpi_mdtp, smpirun = "smpirun", out_dir = "results/simulate", values = "real";
  long long gpus = 0;
  std::vector<std::string> command;  // after --: the mdtp command the simulated ranks run
};

// SimGrid settings every simulated run uses (recorded in the provenance):
//  - computation is not measured on this host but charged from the per-kernel model
//    (simulate/charging_backend.hpp), so simulated times are reproducible;
//  - CM02, SimGrid's plain max-min flow model without TCP corrections: NVLink and NCCL are not
//    TCP, and the platform's bandwidths are already the rates a large transfer reaches;
//  - no TCP window cap (TCP-gamma 0) and no acknowledgement traffic in the reverse direction
//    (crosstraffic 0: it took 5 % of a link's bandwidth whenever data flowed both ways, as in every
//    ring step);
//  - MPI_Test and clock reads cost no simulated time (smpi/test:0, smpi/wtime:0): SMPI's default
//    charges every unsuccessful MPI_Test 0.1 ms, growing with each repeat, which turned the
//    pipeline's polls of its posted receives into most of a simulated step (a real poll of a
//    request or a GPU event takes well under a microsecond);
//  - MPICH's algorithms for the blocking collectives of set-up and reports (host names, ledger
//    statistics: comm/bookkeeping_collectives.hpp): SMPI's default ones run as its non-blocking
//    collectives, whose completion scans every request in flight — a world all-gather of host
//    names held 128 simulated ranks for minutes.  The experiment's own collectives are mdtp's
//    rings and chains over point-to-point (comm/ring_collectives.hpp), untouched by this.
const std::vector<std::string> kSettings = {"smpi/simulate-computation:no", "network/model:CM02",
                                            "network/TCP-gamma:0", "network/crosstraffic:0",
                                            "smpi/test:0", "smpi/wtime:0", "smpi/coll-selector:mpich",
                                            "smpi/privatization:no"};

// Synthetic values (--values synthetic, simulate/synthetic_allocator.hpp): the tensors live in an
// SMPI_SHARED_MALLOC arena in its "global" mode, one file block mapped over and over; blocks of
// 16 MiB keep a terabyte of address space within Linux's 65,530 mappings a process may hold.
const std::vector<std::string> kSyntheticSettings = {"smpi/shared-malloc:global",
                                                     "smpi/shared-malloc-blocksize:16777216"};

// A flag of the simulated command, alone or as --flag=value.
bool command_has_flag(const std::vector<std::string>& command, const std::string& flag) {
  for (const std::string& arg : command)
    if (arg == flag || arg.rfind(flag + "=", 0) == 0) return true;
  return false;
}

fs::path default_smpi_mdtp() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  require(!ec, "cannot find the mdtp executable (/proc/self/exe): ", ec.message());
  return self.parent_path().parent_path() / (self.parent_path().filename().string() + "-smpi") / "mdtp";
}

// The CPU-clock stub beside this mdtp (libmdtp_cpu_clock_stub.so), or nothing where the build made
// none (the sanitizer build).
fs::path cpu_clock_stub() {
  std::error_code ec;
  const fs::path stub = fs::read_symlink("/proc/self/exe", ec).parent_path() / "libmdtp_cpu_clock_stub.so";
  return !ec && fs::exists(stub) ? stub : fs::path();
}

std::string first_line_of(const std::string& command) {
  std::string line;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[256];
    if (std::fgets(buffer, sizeof buffer, pipe) != nullptr) line = buffer;
    pclose(pipe);
  }
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  return line;
}

std::string read_text(const std::string& path, const char* what) {
  std::ifstream in(path);
  require(static_cast<bool>(in), what, " '", path, "' cannot be read");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  require(static_cast<bool>(out), "cannot write '", path.string(), "'");
}

int run_simulate(const SimulateOptions& o) {
  require(!o.command.empty(), "mdtp simulate needs the command to simulate after --, e.g. "
                              "`mdtp simulate --cluster dgx-h100 --gpus 64 -- train --tp 8 --steps 1`");
  const std::string& what = o.command.front();
  require(what == "train" || what == "bench" || what == "collectives",
          "mdtp simulate runs `train`, `bench` or `collectives` on the simulated cluster; got '", what, "'");
  require(o.gpus >= 1, "--gpus must be >= 1; got ", o.gpus);
  require(o.values == "real" || o.values == "synthetic", "--values must be real or synthetic; got '", o.values, "'");
  const bool synthetic = o.values == "synthetic";
  require(!synthetic || what == "train", "--values synthetic runs `train` only: `", what,
          "` checks or reports values (bench holds every mode against its serial result)");
  for (const char* flag : {"--save", "--init-from", "--dump-grads"})
    require(!synthetic || !command_has_flag(o.command, flag), "--values synthetic: train ", flag,
            " reads or writes values, which synthetic tensors do not hold; run it with --values real");
  const cost::Cluster cluster = cost::load_cluster(cost::find_cluster(o.cluster));
  const fs::path smpi_mdtp = o.smpi_mdtp.empty() ? default_smpi_mdtp() : fs::path(o.smpi_mdtp);
  require(fs::exists(smpi_mdtp), "the SMPI build of mdtp '", smpi_mdtp.string(),
          "' does not exist: configure one with `cmake -S . -B build-smpi -DMDTP_SMPI=ON` and build its `mdtp` "
          "(./quickstart.sh simulate does both), or name it with --smpi-mdtp");
  const std::string version = first_line_of(o.smpirun + " -version 2>/dev/null");
  require(version.rfind("SimGrid", 0) == 0, "'", o.smpirun,
          " -version' did not answer like SimGrid's smpirun (install libsimgrid-dev, or name it with --smpirun)");

  simulate::Platform platform;
  fs::path platform_path;
  if (!o.platform.empty()) {
    platform.xml = read_text(o.platform, "--platform");
    platform.hosts = simulate::platform_hosts(platform.xml);
    platform_path = fs::absolute(o.platform);
  } else {
    platform = simulate::rail_optimised_platform(cluster, static_cast<int>(o.gpus));
    platform_path = fs::absolute(fs::path(o.out_dir) / fmt::format("{}-{}.xml", cluster.name, o.gpus));
  }
  require(static_cast<long long>(platform.hosts.size()) >= o.gpus, "the platform ",
          platform_path.string(), " declares ", platform.hosts.size(), " hosts; --gpus ", o.gpus,
          " needs one per GPU");
  platform.hosts.resize(static_cast<std::size_t>(o.gpus));
  fs::create_directories(o.out_dir);
  if (o.platform.empty()) write_text(platform_path, platform.xml);
  const fs::path hostfile = fs::absolute(fs::path(o.out_dir) / fmt::format("{}-{}.hosts", cluster.name, o.gpus));
  write_text(hostfile, simulate::host_file(platform));

  std::vector<std::string> settings = kSettings;
  if (synthetic) settings.insert(settings.end(), kSyntheticSettings.begin(), kSyntheticSettings.end());
  run::SimulationContext context{cluster.name, cluster.path, platform_path.string(), static_cast<int>(o.gpus),
                                 version, settings, !synthetic};
  setenv(run::kSimulationEnvironment, run::simulation_json(context).c_str(), 1);
  setenv("OPENBLAS_NUM_THREADS", "1", 1);  // every simulated rank shares this process's one thread
  // SimGrid links GSL's CBLAS, and with the program's globals shared between the simulated ranks
  // (smpi/privatization:no) their cblas_sgemm resolved to it (reference loops: half the wall time
  // of a 64-rank run) instead of the BLAS mdtp was built with.  Preloading that BLAS puts it first.
  // SMPI reads a CPU-time clock (a system call) as each rank leaves and re-enters MPI, to benchmark
  // host code this configuration never charges (smpi/simulate-computation:no): the stub built
  // beside this mdtp reads those clocks as zero (experiments/preload/cpu_clock_stub.c), a fifth of
  // the wall time at 256 ranks.  It and TCMalloc (below) only speed the simulator up:
  // MDTP_SIMULATE_SPEED_PRELOADS=0 leaves both out, and the simulated times are the same (tested).
  std::vector<std::string> preloads;
  if (const BlasLibrary& blas = blas_library(); !blas.path.empty()) preloads.push_back(blas.path);
  const char* speed = std::getenv("MDTP_SIMULATE_SPEED_PRELOADS");
  const bool speed_preloads = speed == nullptr || std::string(speed) != "0";
  if (const fs::path stub = cpu_clock_stub(); speed_preloads && !stub.empty()) preloads.push_back(stub.string());
  // SimGrid allocates and frees its request and activity objects for every message: TCMalloc, found
  // when mdtp was configured, serves them in two thirds of glibc's time (the 2D 256-rank run 25 s ->
  // 17 s; the simulated times identical).
#ifdef MDTP_SIMULATOR_MALLOC
  if (speed_preloads && fs::exists(MDTP_SIMULATOR_MALLOC)) preloads.emplace_back(MDTP_SIMULATOR_MALLOC);
#endif
  if (const char* preload = std::getenv("LD_PRELOAD"); preload != nullptr && *preload != '\0') preloads.emplace_back(preload);
  if (!preloads.empty()) setenv("LD_PRELOAD", fmt::format("{}", fmt::join(preloads, ":")).c_str(), 1);

  std::vector<std::string> args = {o.smpirun, "-np", std::to_string(o.gpus), "-platform", platform_path.string(),
                                   "-hostfile", hostfile.string()};
  for (const auto& s : settings) args.push_back("--cfg=" + s);
  args.push_back(smpi_mdtp.string());
  args.insert(args.end(), o.command.begin(), o.command.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  // smpirun exits 0 when a simulated rank calls MPI_Abort (SimGrid 3.32), so a rank that aborts
  // leaves its exit status in this file (cli/main.cpp, report_run_error) and it becomes ours.
  const fs::path failure = fs::absolute(fs::path(o.out_dir) / fmt::format("{}-{}-{}.failed", cluster.name, o.gpus, getpid()));
  fs::remove(failure);
  setenv(run::kSimulationFailureEnvironment, failure.string().c_str(), 1);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t child = fork();
  require(child >= 0, "cannot start ", o.smpirun, ": fork failed: ", std::strerror(errno));
  if (child == 0) {
    execvp(argv[0], argv.data());
    const std::string line = fmt::format("mdtp simulate: error: cannot start {}: {}\n", o.smpirun, std::strerror(errno));
    [[maybe_unused]] const auto written = write(STDERR_FILENO, line.data(), line.size());
    _exit(127);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  if (fs::exists(failure)) {
    std::ifstream in(failure);
    int aborted = 0;
    if (!(in >> aborted) || aborted == 0) aborted = 1;
    fs::remove(failure);
    if (code == 0) code = aborted;
  }
  return code;
}

}  // namespace

Command add_simulate(CLI::App& root) {
  auto o = std::make_shared<SimulateOptions>();
  CLI::App* app = add_command(root, "simulate",
                              "run `train`, `bench` or `collectives` on a simulated cluster (SimGrid SMPI; the SMPI build of mdtp)");
  app->footer(
      "The platform is generated from the cluster preset (a rail-optimised fat tree, docs/simulate.md) unless\n"
      "--platform names one; results carry provenance 'simulated'.\n"
      "  mdtp simulate --cluster dgx-h100 --gpus 64 -- train --tp-mode 2d --tp 4 --pp 2 --zero 3 --steps 1");
  app->add_option("--cluster", o->cluster, "cluster preset (data/clusters/NAME.json) or a cluster file")->required();
  add(*app, "--gpus", o->gpus, "simulated GPUs (ranks)")->required();
  app->add_option("--platform", o->platform, "a SimGrid platform file to run on instead of the generated one");
  app->add_option("--smpi-mdtp", o->smpi_mdtp, "the SMPI build of mdtp (default: BUILD-smpi/mdtp beside this one)");
  app->add_option("--smpirun", o->smpirun, "SimGrid's launcher (default smpirun)");
  app->add_option("--values", o->values,
                  "real (default: every kernel runs on the host, values checked) or synthetic (train only: tensors "
                  "hold no values, kernels are charged but not run; models of realistic size at scale)")
      ->type_name("real|synthetic");
  app->add_option("--out-dir", o->out_dir, "where the platform and host files are written (default results/simulate)");
  app->add_option("command", o->command, "after --: the mdtp command the simulated ranks run (train, bench or collectives)");
  return {app, false, [o](const std::string&) { return run_simulate(*o); }};
}

}  // namespace mdtp::cli
