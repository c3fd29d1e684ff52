// mdtp experiment: the main job, as `./quickstart.sh` runs it.  It launches the other drivers
// itself, so one command does it all and the README documents one command:
//   1. mpiexec -n 2 mdtp calibrate   a short α-β sweep on ranks that each have a core (skipped,
//                                    with a note, on a one-core machine or with --calibrate-ranks 0)
//   2. mpiexec -n 8 mdtp bench       the TP modes on one transformer-sized MLP, using that fit
//   3. python3 report.py             plots + summary.md, and the table printed
// into one results file (default results/experiment.h5), appended to on every run, never
// overwritten; the report shows the latest batch.  Not an MPI program itself.
#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "core/error.hpp"

extern char** environ;

namespace mdtp::cli {
namespace {

namespace fs = std::filesystem;

const char* kUsage =
    "usage: mdtp experiment [options]        (launches mpiexec itself; do not run it under mpiexec)\n"
    "  --ranks N              ranks of the mode comparison                                  [8]\n"
    "  --mpiexec PATH         MPI launcher [$MDTP_MPIEXEC, else mpiexec.mpich, else mpiexec]\n"
    "  --out FILE.h5          results file, appended to                   [results/experiment.h5]\n"
    "  --report DIR           plots and summary.md                     [<out without .h5>-report]\n"
    "  --calibrate-ranks N    ranks of the α-β calibration (0: skip; never more than the cores) [2]\n"
    "  --calibrate-max-bytes B  largest calibration message                                 [16M]\n"
    "  --modes LIST --layer KIND --batch B --seq S --hidden H --ffn F --dtype T --warmup N --reps N\n"
    "                         passed to mdtp bench    [1d,1d-sp,2d,2.5d,3d mlp 4 128 512 2048 f32 3 10]\n"
    "  --python PATH          a python3 with h5py, numpy, matplotlib [$MDTP_PYTHON, /usr/bin/python3, python3]\n"
    "  --analysis DIR         where report.py lives       [found from the build's source directory]\n";

// Runs argv[0] (searched on PATH) with the parent's stdout/stderr; returns its exit status.
int run_process(const std::vector<std::string>& argv, bool quiet = false) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (quiet) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  }
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return 127;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 127;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string quoted(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + (a.find(' ') == std::string::npos ? a : "'" + a + "'");
  return s;
}

std::string self_executable() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  require(!ec, "cannot find the mdtp executable (/proc/self/exe): ", ec.message());
  return p.string();
}

bool on_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string candidate = dirs.substr(start, end - start) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

std::string find_mpiexec(const Args& args) {
  std::string given = args.get("--mpiexec", "");
  if (given.empty() && std::getenv("MDTP_MPIEXEC")) given = std::getenv("MDTP_MPIEXEC");
  if (!given.empty()) {
    require(on_path(given), "--mpiexec '", given, "' is not an executable program");
    return given;
  }
  // MPICH explicitly: Debian's `mpiexec` alternative may point at Open MPI.
  for (const char* name : {"mpiexec.mpich", "mpiexec"})
    if (on_path(name)) return name;
  throw_error("no MPI launcher found (tried mpiexec.mpich and mpiexec on PATH); pass --mpiexec PATH");
}

std::string find_python(const Args& args) {
  std::vector<std::string> candidates;
  if (args.has("--python")) candidates.push_back(args.get("--python", ""));
  else {
    if (const char* env = std::getenv("MDTP_PYTHON"); env && *env) candidates.push_back(env);
    // Debian's interpreter first: a pyenv/venv python3 earlier on PATH usually lacks h5py.
    candidates.push_back("/usr/bin/python3");
    candidates.push_back("python3");
  }
  for (const auto& py : candidates)
    if (on_path(py) && run_process({py, "-c", "import h5py, numpy, matplotlib"}, true) == 0) return py;
  throw_error("no python3 with h5py, numpy and matplotlib found (tried ", quoted(candidates),
              "); install python3-h5py python3-numpy python3-matplotlib or pass --python PATH");
}

// report.py: --analysis, $MDTP_SOURCE_DIR, the source directory recorded in the build's
// CMakeCache.txt beside the executable, or a parent of the executable's directory.
std::string find_report_script(const Args& args, const std::string& self) {
  std::vector<fs::path> dirs;
  if (args.has("--analysis")) dirs.emplace_back(args.get("--analysis", ""));
  else {
    if (const char* env = std::getenv("MDTP_SOURCE_DIR"); env && *env) dirs.push_back(fs::path(env) / "experiments/analysis");
    const fs::path build = fs::path(self).parent_path();
    std::ifstream cache(build / "CMakeCache.txt");
    for (std::string line; std::getline(cache, line);)
      if (line.rfind("CMAKE_HOME_DIRECTORY:INTERNAL=", 0) == 0)
        dirs.push_back(fs::path(line.substr(line.find('=') + 1)) / "experiments/analysis");
    for (fs::path p = build; !p.empty() && p != p.root_path(); p = p.parent_path())
      dirs.push_back(p / "experiments/analysis");
  }
  for (const auto& d : dirs)
    if (fs::exists(d / "report.py")) return (d / "report.py").string();
  throw_error("cannot find experiments/analysis/report.py; pass --analysis DIR or set MDTP_SOURCE_DIR");
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace

int run_experiment(const std::vector<std::string>& argv) {
  Args args(argv,
            {"--ranks", "--mpiexec", "--out", "--report", "--calibrate-ranks", "--calibrate-max-bytes", "--modes",
             "--layer", "--batch", "--seq", "--hidden", "--ffn", "--dtype", "--warmup", "--reps", "--python",
             "--analysis"},
            {"--help"});
  if (args.flag("--help")) {
    std::cout << kUsage;
    return 0;
  }
  for (const char* launched : {"PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK"})
    require(std::getenv(launched) == nullptr, "mdtp experiment launches mpiexec itself: run it directly, not under "
            "mpiexec (found ", launched, " in the environment)");
  const auto start = std::chrono::steady_clock::now();
  const long long ranks = args.get_int("--ranks", 8);
  require(ranks >= 1 && ranks <= 4096, "--ranks must be between 1 and 4096; got ", ranks);
  const std::string out = args.get("--out", "results/experiment.h5");
  require(fs::path(out).extension() == ".h5", "--out should name an .h5 file; got '", out, "'");
  const std::string report = args.get("--report", (fs::path(out).parent_path() / fs::path(out).stem()).string() + "-report");
  const std::string self = self_executable(), mpiexec = find_mpiexec(args), python = find_python(args);
  const std::string script = find_report_script(args, self);
  const int cores = usable_cores();
  long long calibrate_ranks = args.get_int("--calibrate-ranks", 2);
  require(calibrate_ranks >= 0, "--calibrate-ranks must not be negative; got ", calibrate_ranks);
  std::string calibration_note;
  if (calibrate_ranks > cores) {
    calibration_note = "calibration skipped: " + std::to_string(calibrate_ranks) + " ranks would oversubscribe " +
                       std::to_string(cores) + " core(s); the model uses default link parameters";
    calibrate_ranks = 0;
  } else if (calibrate_ranks == 1) {
    calibration_note = "calibration skipped: one rank has no links to measure";
    calibrate_ranks = 0;
  }

  std::printf("== mdtp experiment: %lld ranks on a machine with %d usable cores%s\n", ranks, cores,
              ranks > cores ? " — OVERSUBSCRIBED: times measure the OS scheduler as much as the algorithms" : "");
  std::printf("   results: %s (appended)   report: %s\n   launcher: %s   python: %s\n", out.c_str(), report.c_str(),
              mpiexec.c_str(), python.c_str());
  std::fflush(stdout);

  if (calibrate_ranks > 0) {
    std::vector<std::string> cmd{mpiexec, "-n", std::to_string(calibrate_ranks), self, "calibrate", "--out", out,
                                 "--max-bytes", args.get("--calibrate-max-bytes", "16M"), "--iters", "10",
                                 "--warmup", "3"};
    std::printf("\n== 1/3 calibration: %s\n", quoted(cmd).c_str());
    std::fflush(stdout);
    const int rc = run_process(cmd);
    require(rc == 0, "the calibration failed (exit status ", rc, "): ", quoted(cmd));
  } else {
    std::printf("\n== 1/3 %s\n", calibration_note.empty() ? "calibration skipped (--calibrate-ranks 0)"
                                                           : calibration_note.c_str());
  }

  std::vector<std::string> bench{mpiexec, "-n", std::to_string(ranks), self, "bench", "--out", out,
                                 "--modes", args.get("--modes", "1d,1d-sp,2d,2.5d,3d"),
                                 "--layer", args.get("--layer", "mlp"), "--batch", args.get("--batch", "4"),
                                 "--seq", args.get("--seq", "128"), "--hidden", args.get("--hidden", "512"),
                                 "--dtype", args.get("--dtype", "f32"), "--warmup", args.get("--warmup", "3"),
                                 "--reps", args.get("--reps", "10")};
  if (args.has("--ffn")) bench.insert(bench.end(), {"--ffn", args.get("--ffn", "")});
  if (calibrate_ranks > 0) bench.insert(bench.end(), {"--calibration", out});
  std::printf("\n== 2/3 mode comparison: %s\n", quoted(bench).c_str());
  std::fflush(stdout);
  const int bench_rc = run_process(bench);
  require(bench_rc == 0 || bench_rc == 1, "the benchmark failed (exit status ", bench_rc, "): ", quoted(bench));

  std::vector<std::string> analysis{python, script, out, "--out", report};
  std::printf("\n== 3/3 analysis: %s\n", quoted(analysis).c_str());
  std::fflush(stdout);
  const int report_rc = run_process(analysis);
  require(report_rc == 0, "the analysis failed (exit status ", report_rc, "): ", quoted(analysis));

  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("\n== mdtp experiment done in %.0f s: %s, report in %s%s\n", seconds, out.c_str(), report.c_str(),
              bench_rc == 0 ? "" : " — a CHECK FAILED (see above)");
  return bench_rc;
}

}  // namespace mdtp::cli
