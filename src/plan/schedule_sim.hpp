#pragma once
// A whole-pipeline simulation of a Schedule: every stage runs its action list in order, an action
// starting once the stage is free and its input has arrived — a forward waits for the previous
// virtual stage's forward of the same micro-batch, a backward-input pass for the next virtual
// stage's (the last virtual stage of the micro-batch's route for its own forward), a weight pass
// for its own B.  Transfers
// are matched first-in first-out per (source stage, destination stage, direction) channel, as
// NCCL matches point-to-point calls (it ignores tags): the k-th receive on a channel must be the
// k-th send's activation or gradient, or the schedule would silently mix up micro-batches.
//
// The simulation proves a schedule completes (no cyclic wait: an mdtp::Error names the stuck
// actions otherwise), checks every channel's order, and times it from per-pass durations: each
// stage's busy and idle time, whose idle part is the bubble, and the activation contexts each
// stage holds at its peak (full ones: forward done, backward-input not yet; weight-only ones:
// backward-input done, weight pass not yet — these keep only what W needs).
#include <string>
#include <vector>

#include "plan/schedule.hpp"

namespace mdtp {

// Durations of one chunk's passes (T_F, T_B, T_W); BW takes T_B + T_W.
struct PassTimes {
  double forward = 1.0;
  double backward_input = 1.0;
  double backward_weight = 1.0;
};

struct ActionTiming {
  double start = 0.0, end = 0.0;
};

struct Simulation {
  double makespan = 0.0;                         // from the first start to the last end
  std::vector<std::vector<ActionTiming>> times;  // per stage, per action
  std::vector<double> busy, idle;                // per stage: idle = makespan − busy
  std::vector<int> peak_full, peak_weight_only;  // per stage: contexts held at once
  // The idle time of the busiest stage over its busy time (1F1B: (p−1)/m for equal passes).
  double bubble_over_busy() const;
};

// `transfer` seconds between a send's end and its receive being usable (0: instantaneous).
Simulation simulate(const Schedule& schedule, const PassTimes& times, double transfer = 0.0);

// Contexts held per stage at the peak, read off the action order alone (no timing needed).
struct PeakContexts {
  int full = 0, weight_only = 0;
  int total = 0;  // of full + weight-only at any one time
};
std::vector<PeakContexts> peak_contexts(const Schedule& schedule);

}  // namespace mdtp
