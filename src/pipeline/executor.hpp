#pragma once
// PipelineExecutor: runs one stage's action list of a Schedule (plan/schedule.hpp) for one step,
// on a GptModel holding that stage's chunks (chunk c of the stage is model.chunk(c)).
//
//   F(i, c)   receive the residual stream from the previous virtual stage (none on a first one,
//             which embeds micro-batch i's tokens), run the chunk forward, send the result on
//             (none on a last one, which adds its local loss sum to the step's)
//   B(i, c)   receive the gradient from the next virtual stage (a last one starts from the
//             loss), run the backward-input pass, send the input gradient back (none on a first
//             virtual stage)
//   W(i, c)   the weight pass (the step's last one of a chunk marks its gradients complete)
//   BW(i, c)  B then W
//
// Transfers are non-blocking (BoundaryLink), tagged by (direction, micro-batch, virtual stage),
// between the stages that run neighbouring virtual stages of the micro-batch's route
// (plan/virtual_stage.hpp: round-robin, V-shaped — whose bottom hands over inside the stage, with
// no transfer — or DualPipe's two mirrored routes),
// so MPI matches them whatever the posting order; receives are posted ahead (a small look-ahead
// window, so their buffers do not all live at once) and sends complete in the background.  MPICH
// advances non-blocking transfers only inside MPI calls, so the executor polls every pending
// transfer between actions; the time an action waits for its input is measured apart from its
// compute ("exposed p2p wait").  Each (micro-batch, chunk) has its own ChunkSaved, created by F and
// released by W, and the executor counts how many it holds at once against the schedule's bound.
//
// Correctness of the action lists (completion, channel order) is the simulator's to prove.  With
// NCCL, which ignores tags, transfers between two stages must also be posted in one order on both
// sides; that is not arranged here (see docs/pipeline.md).
#include <chrono>
#include <deque>
#include <map>
#include <tuple>
#include <vector>

#include "comm/run_clock.hpp"
#include "model/gpt.hpp"
#include "pipeline/boundary.hpp"
#include "plan/schedule.hpp"

namespace mdtp {

// One action as it ran: seconds from the step's start.
struct ActionRecord {
  Action action;
  double wait_start = 0.0;  // waiting for its input from here ...
  double start = 0.0;       // ... computing from here ...
  double end = 0.0;         // ... to here
};

struct StageStepResult {
  double loss_sum = 0.0;  // the last virtual stage's local loss sums (0 elsewhere)
  // The same per micro-batch (0 where this stage did not end the micro-batch's route): DualPipe's
  // two end stages each end half the routes, and the trainer adds these in micro-batch order.
  std::vector<double> loss_by_micro_batch;
  std::vector<ActionRecord> timeline;
  double seconds = 0.0;    // the whole step on this stage, trailing sends included
  double p2p_wait = 0.0;   // exposed: actions waiting for their input
  int peak_full = 0, peak_weight_only = 0, peak_total = 0;  // ChunkSaved held at once
};

class PipelineExecutor {
 public:
  // `stage` is this rank's index in its pp group; the model holds exactly the stage's chunks.
  PipelineExecutor(GptModel& model, const Mesh& mesh, Schedule schedule, int stage);

  // One step over `micro_batches` (their count is the schedule's m).  `loss_scale`: see
  // GptModel::loss_scale.  Collective over the pp group (and whatever the model's layers use).
  StageStepResult run_step(const std::vector<MicroBatch>& micro_batches, double loss_scale);

  const Schedule& schedule() const { return schedule_; }
  int stage() const { return stage_; }
  const BoundaryLink& link() const { return link_; }

 private:
  using Clock = RunClock;
  struct Slot {
    ChunkSaved saved;
    bool input_done = false;
  };

  void run_action(const Action& a, const std::vector<MicroBatch>& mbs, double loss_scale, StageStepResult& out);
  void post_receives_ahead(std::size_t from);
  Tensor take_input(const Action& a, double& waited);
  void poll();
  void count_contexts(StageStepResult& out) const;
  int virtual_stage(const Action& a) const { return schedule_.virtual_stage(stage_, a.chunk); }
  bool needs_input(const Action& a) const;
  // The virtual stage whose output (F) or input gradient (B) the action takes.
  int input_source(const Action& a) const;
  // Sends x from virtual stage from_vs on to to_vs, or keeps it here when this stage runs to_vs.
  void pass_on(const Tensor& x, char direction, int microbatch, int from_vs, int to_vs);
  int tag(char direction, int microbatch, int virtual_stage) const;
  double now() const { return std::chrono::duration<double>(Clock::now() - step_start_).count(); }

  GptModel& model_;
  const Mesh& mesh_;
  Schedule schedule_;
  int stage_, virtual_stages_;
  BoundaryLink link_;
  std::vector<int> last_weight_pass_;  // per chunk: index of its last W/BW in the action list
  // Per step:
  Clock::time_point step_start_;
  std::map<std::pair<int, int>, Slot> slots_;                     // (micro-batch, chunk)
  std::map<std::size_t, BoundaryLink::Transfer> receives_;        // by action index
  std::size_t next_receive_ = 0;                                  // first action not yet looked at
  std::deque<BoundaryLink::Transfer> sends_;
  // Hand-offs between this stage's own chunks (the bottom of a V), by (direction, micro-batch,
  // producing virtual stage): no transfer, no ledger entry.
  std::map<std::tuple<char, int, int>, Tensor> local_handoffs_;
};

}  // namespace mdtp
