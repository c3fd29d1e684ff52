#pragma once
// The training loop behind `mdtp train`: resolves the configuration (command line, checkpoint,
// data) identically on every rank, builds the mesh, mode, GPT model and optimizer, runs the steps
// and writes what was asked for (checkpoint, gradient dump, results).  Everything a run can refuse
// (options, checkpoint, data) is refused on every rank before the first collective.
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "io/table.hpp"
#include "mesh/mesh.hpp"
#include "plan/schedule.hpp"
#include "spec/run_spec.hpp"
#include "train/checkpoint.hpp"
#include "zero/zero_config.hpp"

namespace mdtp {

// Where the model computes and how its groups communicate.  Empty members mean the host backend
// and MPI communicators; the `mdtp` program fills them for `--device cuda` (CudaBackend + NCCL),
// which keeps this library free of CUDA.
struct TrainDevice {
  std::function<std::unique_ptr<Backend>(MPI_Comm world)> make_backend;
  std::function<CommFactory(const Backend& backend, MPI_Comm world)> make_comm_factory;
  std::function<std::unique_ptr<GptKernels>(const Backend& backend)> make_kernels;
};

// What `mdtp train` runs before the model's shape and the data-parallel size are resolved: the run
// spec's defaults, with every model size 0 (from the checkpoint given with --init-from, else the
// data — the vocabulary and, for HDF5 token data, T — else kDefaultModel) and dp 0 (the world /
// (tp · pp)).  A size given together with a checkpoint must match it.
RunSpec unresolved_train_spec();

// Defaults for an unspecified model shape (a small character-level GPT; the vocabulary comes from
// the data).
inline constexpr ModelShape kDefaultModel{.layers = 2, .hidden = 64, .heads = 4, .seq = 32, .vocab = 0};

// The trainer's configuration: the run spec (what runs) plus where its data and outputs live and
// how the run behaves (plan_training resolves and checks it; train/train_setup.hpp).
struct TrainConfig {
  RunSpec spec = unresolved_train_spec();
  std::int64_t steps = 10;
  std::string data;        // token data (.h5) or a text corpus (.txt); "" = data/corpus.txt
  std::string init_from;   // checkpoint to start from
  std::string save;        // checkpoint to write after the last step
  std::string dump_grads;  // gradients of this run's first step
  std::string out;         // results file (a /runs/<n>-train group is appended)
  std::string command_line;
  TrainDevice device{};
  // A step whose loss is NaN/Inf is skipped (its update not applied, counted in the results)
  // instead of stopping the run (docs/failures.md).
  bool skip_nonfinite = false;
  // Time blocking collectives after a barrier on their group, the wait for the last peer apart
  // from the transfer (comm/ledger.hpp); also MDTP_SYNC_TIMING=1.
  bool sync_timing = false;
  // Tables the program adds to the results file beside the trainer's own, asked for on rank 0 as
  // the file is written, given the steps that ran (the SMPI build: the simulated links' traffic and
  // the charged kernels, simulate/link_traffic.hpp, simulate/kernel_tally.hpp).
  std::function<std::map<std::string, Table>(std::int64_t steps_run)> extra_tables;
  // Called as the first step starts (true) and after the last one ends (false), on the ranks that
  // set it: the SMPI build counts the simulated links' traffic of the steps alone.
  std::function<void(bool steps_running)> on_steps;
};

struct StepRecord {
  std::int64_t step = 0;  // 1-based, counting the checkpoint's steps
  double loss = 0.0;
  double grad_norm = 0.0;  // of the true (unscaled) gradients; non-finite on an f16 overflow
  double seconds = 0.0;  // slowest rank
  double tokens_per_second = 0.0;
  double loss_scale = 1.0;  // the scale this step's backward ran with (1 outside f16)
  bool overflow = false;    // f16's dynamic scaling found a non-finite norm: the step was skipped
};

struct TrainResult {
  RunSpec spec;     // what ran: the configuration's spec with the model's shape and dp resolved
  std::string partition;  // StagePartition::describe()
  std::vector<StepRecord> steps;
  TrainingState state;  // after the last step
  // This rank's ledger totals per (phase, group, op) of the last step (tests hold them equal to
  // the whole-step plan, cost/gpt_step_comm.hpp).
  std::map<LedgerKey, LedgerTotals> ledger;
  // Bytes this rank holds per category after the last step (MemoryTracker::current), and what
  // the ZeRO engine's bucket plan says it holds (parameters, gradients, optimizer state, master
  // weights; -1 for the categories the plan does not cover).
  std::vector<std::pair<MemCategory, std::int64_t>> memory_held, memory_model;
  // The peak bytes per category over the run (MemoryTracker::peak).
  std::vector<std::pair<MemCategory, std::int64_t>> memory_peak;
  // ---- activation memory (docs/memory.md): this rank's kept-activation peak over the run as
  // sampled at every pass end (Σ bytes held by the contexts in flight), the allocator's
  // `activations` counter at the same points, the model of the kept peak (plan/kept_activations.hpp
  // over model/activation_bytes.hpp), and whether measured == model on every rank.
  struct KeptActivations {
    std::int64_t measured = 0, allocator_at_pass_ends = 0, model = 0;
    bool equal_on_every_rank = false;
    // The `parameters` counter's peak inside the units' passes, and its model: the held bytes
    // (bucket plan) plus, under ZeRO-3, the gathered buckets in use and prefetched
    // (plan/gathered_parameters.hpp).
    std::int64_t parameters_in_pass = 0, parameters_in_pass_model = 0;
    // The allocator's `activations` counter at its peak inside the steps — the kept contexts plus
    // the working set of the pass running — and its model (plan/activation_peak.hpp over
    // model/activation_timeline.hpp); -1 with a pipeline, whose boundary tensors in flight depend
    // on the peers' timing.
    std::int64_t in_step = 0, in_step_model = -1;
  } kept_activations;
  // ---- end activation memory
  // The `gradients` counter's peak inside the steps (ZeRO-2/3 free each full gradient bucket once
  // it is reduced: docs/zero.md §3) and its model (plan/gradient_peak.hpp); 0 measured when no step
  // ran.  kept_activations.equal_on_every_rank covers it too.
  struct GradientsInStep {
    std::int64_t measured = 0, model = 0;
  } gradients_in_step;
  // Faults (docs/failures.md): the signal that stopped the run after a step (0: none; results and
  // checkpoint are written all the same), and the steps skipped for a non-finite loss.
  int stop_signal = 0;
  std::int64_t skipped_nonfinite = 0;
  // f16 with dynamic loss scaling: the steps skipped for an overflow (their scale then backed off).
  std::int64_t overflow_steps = 0;
  // Wall seconds on the slowest rank to build the model (parameters allocated and drawn; at
  // ZeRO-3 nothing is drawn yet) and then the optimizer (the ZeRO engine's buffers, state, and
  // at ZeRO-3 the shards' draw); a checkpoint load is not included.
  double setup_model_seconds = 0, setup_optimizer_seconds = 0;
  // The median step time after the first (which also pays first touches), what the set-up is held
  // against; 0 with fewer than two steps.
  double median_later_step_seconds() const;
};

// Collective over `world`.  `progress` (rank 0's stream, or null) receives one line per step.
TrainResult train(const TrainConfig& config, MPI_Comm world, std::ostream* progress = nullptr);

}  // namespace mdtp
