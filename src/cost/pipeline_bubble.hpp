#pragma once
// Pipeline bubble (docs/theory.md §3), p stages, m micro-batches, v model chunks per stage:
//   GPipe and 1F1B     idle = (p−1)/m of the ideal compute time, (p−1)/(m+p−1) of the total;
//   interleaved 1F1B   idle = (p−1)/(v·m) of ideal, (p−1)/(v·m+p−1) of the total;
//   ZB-H1              idle = (p−1)(T_F + T_B − T_W) (Qi et al. 2024): it depends on the times of
//                      the forward F, the input gradient B and the weight gradient W, so only
//                      bubble_seconds gives it; bubble_over_ideal assumes T_F = T_B = T_W there.
//   ZB-H2, ZB-V,       no closed form is used: the schedule's action lists are simulated with
//   DualPipeV,         each chunk's passes at 1/v of the stage's times (under DualPipe a chunk
//   DualPipe           is a whole position run by half the micro-batches: the stage's times)
//                      (plan/schedule_sim.hpp), the bubble being the most idle stage's idle
//                      time (at unit times: ZB-H2 p − 1, ZB-V p − 1 chunk units, DualPipeV
//                      p − 1 and DualPipe p/2 − 1 with their F&B pairs counted as F + B + W,
//                      since mdtp does not overlap them), and the contexts
//                      held read off the order.
// And the micro-batch activations a stage holds at most (GPipe: all m; 1F1B and ZB-H1:
// min(p−r, m) on stage r — W = min(p−r−1, m) warm-up forwards plus the one in steady state, never
// more than m; interleaved: W+1 (micro-batch, chunk) passes with W = m·v when m = p, else
// min(2(p−r−1) + (v−1)·p, m·v)).
#include <vector>

#include "plan/schedule.hpp"  // ScheduleKind: the engine's schedules, the same names

namespace mdtp {
// plan/schedule_sim.hpp's; declared here, not included, since that header's `simulate` function
// would clash with the mdtp::simulate namespace in every file that includes this one.
struct PassTimes;
}  // namespace mdtp

namespace mdtp::cost {

struct PipelineConfig {
  int stages = 1;        // p
  int microbatches = 1;  // m
  int chunks = 1;        // v (interleaved only; 1 otherwise)
  ScheduleKind schedule = ScheduleKind::one_f_one_b;
  int group_size = 0;    // interleaved: Megatron-Core's micro-batch group N (0: p)
};

// Idle time over the ideal (bubble-free) compute time.
double bubble_over_ideal(const PipelineConfig& config);

// Per-micro-batch times of ONE stage (all its chunks): forward, backward-input, backward-weight.
struct StageTimes {
  double forward = 0.0, backward_input = 0.0, backward_weight = 0.0;
};
// The bubble in seconds: (p−1)(T_F+T_B+T_W) for GPipe and 1F1B, divided by v for interleaved
// (each chunk is 1/v of the stage), (p−1)(T_F+T_B−T_W) for ZB-H1 (never below 0).
// `transfer`: the seconds one send between virtual stages takes where the sends run beside the
// compute (asynchronous, overlapped): no stage waits to send, but a pass still waits for its input
// to arrive.  What that adds is read off the schedule simulated with each dependency delayed by it
// against the same schedule without (schedule_sim.hpp), and added to the closed forms above (the
// simulated schedules take it whole).  GPipe then idles 2(p − 1)·transfer more and interleaved,
// in Megatron's groups of N = p micro-batches, 2(p·v − 1)·transfer — the first micro-batch's
// forward crosses each of the p·v − 1 virtual-stage boundaries once and the last one's backward
// once more (stage 0 wraps to its next chunk just as the group's first micro-batch would be back:
// a group of N > p leaves N − p passes of slack there); their steady state has slack for them.  1F1B pays more: its steady
// state has none for the round trip, so it waits again in every cycle.  0: sends that block (their
// time already in `times`) or cost nothing.
double bubble_seconds(const PipelineConfig& config, const StageTimes& times, double transfer = 0.0);
// One chunk's pass times on a schedule whose stages take `stage` per micro-batch, as its simulation
// runs them: each chunk runs 1/v of the stage's work, but under DualPipe (a mirrored mapping) a chunk
// is a whole position run by half the micro-batches, so it takes the stage's times.
PassTimes chunk_pass_times(const Schedule& schedule, const StageTimes& stage);
// Idle time as a fraction of the whole step.
double bubble_fraction_of_total(const PipelineConfig& config);
// Per stage r = 0 … p−1: micro-batch forwards (interleaved: chunk passes) whose activations are
// held at the peak.
std::vector<int> peak_in_flight(const PipelineConfig& config);

}  // namespace mdtp::cost
