// mdtp experiment: the main job, as `./quickstart.sh` runs it.  It launches the other drivers
// itself, so one command does it all and the README documents one command:
//   1. mpiexec -n 2 mdtp calibrate   a short α-β sweep on ranks that each have a core (skipped,
//                                    with a note, on a one-core machine or with --calibrate-ranks 0)
//   2. mpiexec -n 8 mdtp bench       the TP modes on one transformer-sized MLP, using that fit
//   3. mpiexec -n 8 mdtp train       the GPT trained a few steps in a handful of configurations
//                                    (TP modes, a pipeline under 1f1b, zb-h1 and dualpipe, ZeRO-3): bytes,
//                                    memory, the pipeline timeline
//   4. mdtp plan --json              the planner's ranking for a GPT-2-small-sized model of the same
//                                    architecture on a DGX H100 node
//   5. python3 report.py             plots + summary.md, and the tables printed
// into one results file (default results/experiment.h5), appended to on every run, never
// overwritten; the report shows the latest batch.  Not an MPI program itself.
#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>

#include "cli/commands.hpp"
#include "cli/spec_flags.hpp"

extern char** environ;

namespace mdtp::cli {
namespace {

namespace fs = std::filesystem;

struct ExperimentOptions {
  long long ranks = 8;
  std::string mpiexec, out = "results/experiment.h5", report, python, analysis;
  long long calibrate_ranks = 2;
  std::string calibrate_max_bytes = "16M";
  // Passed to `mdtp bench` as typed (and checked here first, so a typo fails before the calibration).
  std::string modes = "1d,1d-sp,2d,2.5d,3d", layer = "mlp", dtype = "f32";
  long long batch = 4, seq = 128, warmup = 3, reps = 10;
  std::string hidden = "512";
  std::optional<std::string> ffn;
  long long train_steps = 3;
};

// One `mdtp train` configuration of the main job (on --ranks ranks).
struct TrainCase {
  const char* label;
  std::vector<std::string> args;
};

// The configurations trained on 8 ranks: three TP modes, a tp × pp × dp pipeline under three
// schedules (1F1B, ZB-H1 and DualPipe, fed from both ends), and ZeRO-3 over every rank.  Fewer ranks keep those whose mesh fits.
std::vector<TrainCase> train_cases(long long ranks) {
  std::vector<TrainCase> all = {
      {"1d tp8", {"--tp-mode", "1d", "--tp", "8"}},
      {"2d tp4 dp2", {"--tp-mode", "2d", "--tp", "4"}},
      {"3d tp8", {"--tp-mode", "3d", "--tp", "8"}},
      {"1d tp2 pp2 dp2 1f1b", {"--tp-mode", "1d", "--tp", "2", "--pp", "2", "--schedule", "1f1b", "--micro-batches", "4"}},
      {"1d tp2 pp2 dp2 zb-h1",
       {"--tp-mode", "1d", "--tp", "2", "--pp", "2", "--schedule", "zb-h1", "--micro-batches", "4"}},
      {"1d tp2 pp2 dp2 dualpipe",
       {"--tp-mode", "1d", "--tp", "2", "--pp", "2", "--schedule", "dualpipe", "--micro-batches", "4"}},
      {"zero-3 dp8", {"--tp-mode", "none", "--zero", "3", "--zero-bucket-mb", "0.05"}},
  };
  if (ranks == 8) return all;
  // Another world size: the ZeRO-3 run (dp = world) and, with an even world, the pipeline.
  std::vector<TrainCase> some = {{"zero-3", {"--tp-mode", "none", "--zero", "3", "--zero-bucket-mb", "0.05"}}};
  if (ranks % 4 == 0) some.insert(some.begin(), all[3]);
  return some;
}

// What the run was resolved to before anything is launched.
struct Plan {
  std::string out, report, self, mpiexec, python, script;
  int cores = 1;
  long long calibrate_ranks = 0;  // 0: skipped, with `calibration_note` saying why
  std::string calibration_note;
};

// Runs argv[0] (searched on PATH) with the parent's stdout/stderr (or stdout into `stdout_path`);
// returns its exit status.
int run_process(const std::vector<std::string>& argv, bool quiet = false, const std::string& stdout_path = "") {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (quiet) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  } else if (!stdout_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
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

std::string find_mpiexec(const std::string& option) {
  std::string given = option;
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

std::string find_python(const std::string& option) {
  std::vector<std::string> candidates;
  if (!option.empty()) candidates.push_back(option);
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
std::string find_report_script(const std::string& option, const std::string& self) {
  std::vector<fs::path> dirs;
  if (!option.empty()) dirs.emplace_back(option);
  else {
    if (const char* env = std::getenv("MDTP_SOURCE_DIR"); env && *env)
      dirs.push_back(fs::path(env) / "experiments/analysis");
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


Plan plan_experiment(const ExperimentOptions& o) {
  for (const char* launched : {"PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK"})
    require(std::getenv(launched) == nullptr, "mdtp experiment launches mpiexec itself: run it directly, not under "
            "mpiexec (found ", launched, " in the environment)");
  Plan p;
  p.out = o.out;
  require(fs::path(p.out).extension() == ".h5", "--out should name an .h5 file; got '", p.out, "'");
  p.report = o.report.empty() ? (fs::path(p.out).parent_path() / fs::path(p.out).stem()).string() + "-report"
                              : o.report;
  p.self = self_executable();
  p.mpiexec = find_mpiexec(o.mpiexec);
  p.python = find_python(o.python);
  p.script = find_report_script(o.analysis, p.self);
  p.cores = usable_cores();
  p.calibrate_ranks = o.calibrate_ranks;
  if (p.calibrate_ranks > p.cores) {
    p.calibration_note = fmt::format("calibration skipped: {} ranks would oversubscribe {} core(s); the model uses "
                                     "default link parameters", p.calibrate_ranks, p.cores);
    p.calibrate_ranks = 0;
  } else if (p.calibrate_ranks == 1) {
    p.calibration_note = "calibration skipped: one rank has no links to measure";
    p.calibrate_ranks = 0;
  } else if (p.calibrate_ranks == 0) {
    p.calibration_note = "calibration skipped (--calibrate-ranks 0)";
  }
  return p;
}

// Prints the step's title and command, runs it, and returns its exit status.
int run_step(const std::string& title, const std::vector<std::string>& cmd, const std::string& stdout_path = "") {
  fmt::print("\n== {}: {}{}\n", title, quoted(cmd), stdout_path.empty() ? "" : " > " + stdout_path);
  std::fflush(stdout);
  return run_process(cmd, false, stdout_path);
}

void calibrate_step(const ExperimentOptions& o, const Plan& p) {
  if (p.calibrate_ranks == 0) {
    fmt::print("\n== 1/5 {}\n", p.calibration_note);
    return;
  }
  const std::vector<std::string> cmd{p.mpiexec, "-n", std::to_string(p.calibrate_ranks), p.self, "calibrate", "--out",
                                    p.out, "--max-bytes", o.calibrate_max_bytes, "--iters", "10", "--warmup", "3"};
  const int rc = run_step("1/5 calibration", cmd);
  require(rc == 0, "the calibration failed (exit status ", rc, "): ", quoted(cmd));
}

// Exit status 1 of `mdtp bench` (a check failed) is reported, not an error of the experiment.
int bench_step(const ExperimentOptions& o, const Plan& p) {
  std::vector<std::string> cmd{p.mpiexec, "-n", std::to_string(o.ranks), p.self, "bench", "--out", p.out,
                               "--modes", o.modes, "--layer", o.layer, "--global-batch", std::to_string(o.batch),
                               "--seq", std::to_string(o.seq), "--hidden", o.hidden, "--dtype", o.dtype,
                               "--warmup", std::to_string(o.warmup), "--reps", std::to_string(o.reps)};
  if (o.ffn) cmd.insert(cmd.end(), {"--ffn-hidden", *o.ffn});
  if (p.calibrate_ranks > 0) cmd.insert(cmd.end(), {"--calibration", p.out});
  const int rc = run_step("2/5 mode comparison", cmd);
  require(rc == 0 || rc == 1, "the benchmark failed (exit status ", rc, "): ", quoted(cmd));
  return rc;
}

// The GPT trained in each configuration, appended to the results file (runs NNNN-train).
void train_step(const ExperimentOptions& o, const Plan& p) {
  const std::vector<TrainCase> cases = train_cases(o.ranks);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    // A 4-layer, 8-head, 128-wide GPT on the shipped corpus: every mode's mesh of 8 ranks divides it.
    std::vector<std::string> cmd{p.mpiexec, "-n", std::to_string(o.ranks), p.self, "train", "--steps",
                                 std::to_string(o.train_steps), "--layers", "4", "--heads", "8", "--hidden", "128",
                                 "--global-batch", "8", "--out", p.out};
    cmd.insert(cmd.end(), cases[i].args.begin(), cases[i].args.end());
    const int rc = run_step(fmt::format("3/5 training {}/{} ({})", i + 1, cases.size(), cases[i].label), cmd);
    require(rc == 0, "the training run failed (exit status ", rc, "): ", quoted(cmd));
  }
}

// The planner's ranking of every parallel configuration of a GPT-2-small-sized model of the same
// architecture on one DGX H100 node (the trained model is too small for the ranking to mean much).
std::string plan_step(const Plan& p) {
  fs::create_directories(p.report);
  const std::string json = (fs::path(p.report) / "plan.json").string();
  const std::vector<std::string> cmd{p.self, "plan", "--layers", "12", "--hidden", "768", "--heads", "12", "--seq",
                                    "1024", "--vocab", "50304", "--global-batch", "256", "--gpus", "8", "--cluster",
                                    "dgx-h100", "--dtype", "bf16", "--dropout", "0.1", "--top", "0", "--json"};
  const int rc = run_step("4/5 planner", cmd, json);
  require(rc == 0, "the planner failed (exit status ", rc, "): ", quoted(cmd));
  return json;
}

void analysis_step(const Plan& p, const std::string& plan_json) {
  const std::vector<std::string> cmd{p.python, p.script, p.out, "--out", p.report, "--plan", plan_json};
  const int rc = run_step("5/5 analysis", cmd);
  require(rc == 0, "the analysis failed (exit status ", rc, "): ", quoted(cmd));
}

int run_experiment(const ExperimentOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  const Plan p = plan_experiment(o);
  fmt::print("== mdtp experiment: {} ranks on a machine with {} usable cores{}\n", o.ranks, p.cores,
             o.ranks > p.cores ? " — OVERSUBSCRIBED: times measure the OS scheduler as much as the algorithms" : "");
  fmt::print("   results: {} (appended)   report: {}\n   launcher: {}   python: {}\n", p.out, p.report, p.mpiexec,
             p.python);
  std::fflush(stdout);
  calibrate_step(o, p);
  const int bench_rc = bench_step(o, p);
  train_step(o, p);
  analysis_step(p, plan_step(p));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("\n== mdtp experiment done in {:.0f} s: {}, report in {}{}\n", seconds, p.out, p.report,
             bench_rc == 0 ? "" : " — a CHECK FAILED (see above)");
  return bench_rc;
}

// Each item of a comma-separated list checked by `check_item` (which throws an mdtp::Error).
template <class Check>
CLI::Validator each_item(Check check_item) {
  return CLI::Validator(
      [check_item](std::string& text) {
        std::string_view rest = text;
        while (true) {
          const std::size_t comma = rest.find(',');
          std::string item(rest.substr(0, comma));
          try {
            check_item(item);
          } catch (const Error& e) {
            return std::string(e.what());
          }
          if (comma == std::string_view::npos) return std::string();
          rest.remove_prefix(comma + 1);
        }
      },
      "");
}

void positive_whole_number(const std::string& item) {
  std::string text = item;
  const std::string problem = detail::parse_number<long long>(text);
  require(problem.empty() && std::stoll(text) > 0, "needs positive whole numbers; got '", item, "'");
}

}  // namespace

Command add_experiment(CLI::App& root) {
  auto o = std::make_shared<ExperimentOptions>();
  CLI::App* app = add_command(root, "experiment",
                              "the main job: calibrate, compare the TP modes on 8 ranks, report (runs mpiexec itself)");
  app->footer(
      "The main job: a short alpha-beta calibration, the TP modes compared by `mdtp bench` on --ranks ranks, the GPT\n"
      "trained in seven configurations (TP modes, pipeline 1f1b, zb-h1 and dualpipe, ZeRO-3), the planner's ranking on a DGX H100\n"
      "node, and experiments/analysis/report.py; all appended to one results file.  It launches mpiexec itself: do not\n"
      "run it under mpiexec.");
  add(*app, "--ranks", o->ranks, "ranks of the mode comparison")->check(between(1, 4096));
  add(*app, "--mpiexec", o->mpiexec, "MPI launcher (default $MDTP_MPIEXEC, else mpiexec.mpich, else mpiexec)")
      ->type_name("PATH");
  add(*app, "--out", o->out, "results file, appended to")->type_name("FILE.h5");
  add(*app, "--report", o->report, "plots and summary.md (default <out without .h5>-report)")->type_name("DIR");
  add(*app, "--calibrate-ranks", o->calibrate_ranks,
      "ranks of the alpha-beta calibration (0: skip; never more than the cores)")
      ->check(at_least(0));
  add(*app, "--calibrate-max-bytes", o->calibrate_max_bytes, "largest calibration message (suffixes K, M, G)")
      ->check(byte_count())
      ->type_name("BYTES");
  add(*app, "--modes", o->modes, "bench: modes, or all")
      ->type_name("LIST")
      ->check(each_item([](const std::string& mode) {
        if (mode != "all") parse_tp_mode(mode);
      }));
  add(*app, "--layer", o->layer, "bench: linear, layernorm or mlp")->check(one_of({"linear", "layernorm", "mlp"}));
  add(*app, "--global-batch", o->batch, "bench: global batch B")->check(at_least(1));
  add(*app, "--seq", o->seq, "bench: sequence length S")->check(at_least(1));
  add(*app, "--hidden", o->hidden, "bench: hidden size(s)")
      ->type_name("H[,H2,...]")
      ->check(each_item(positive_whole_number));
  add(*app, "--ffn-hidden", o->ffn, "bench: MLP inner size(s) (default 4*H)")
      ->type_name("F[,F2,...]")
      ->check(each_item(positive_whole_number));
  add(*app, "--dtype", o->dtype, "bench: f32 or f64")->check(one_of({"f32", "f64"}));
  add(*app, "--warmup", o->warmup, "bench: untimed steps")->check(between(0, 100000));
  add(*app, "--reps", o->reps, "bench: timed steps")->check(between(1, 100000));
  add(*app, "--train-steps", o->train_steps, "train: optimizer steps per configuration")->check(between(1, 100000));
  add(*app, "--python", o->python,
      "a python3 with h5py, numpy, matplotlib (default $MDTP_PYTHON, /usr/bin/python3, python3)")
      ->type_name("PATH");
  add(*app, "--analysis", o->analysis, "where report.py lives (default: found from the build's source directory)")
      ->type_name("DIR");
  add_renamed_flags(*app, {{"--batch", "--global-batch"}, {"--ffn", "--ffn-hidden"}});
  return {app, false, [o](const std::string&) { return run_experiment(*o); }};
}

}  // namespace mdtp::cli
