#pragma once
// Pipeline bubble (docs/theory.md §3), p stages, m micro-batches, v model chunks per stage:
//   GPipe and 1F1B     idle = (p−1)/m of the ideal compute time, (p−1)/(m+p−1) of the total;
//   interleaved 1F1B   idle = (p−1)/(v·m) of ideal, (p−1)/(v·m+p−1) of the total.
// And the micro-batch activations a stage holds at most (GPipe: all m; 1F1B: W+1 with
// W = min(p−r−1, m) warm-up forwards on stage r; interleaved: W+1 (micro-batch, chunk) passes with
// W = m·v when m = p, else min(2(p−r−1) + (v−1)·p, m·v)).
#include <string>
#include <vector>

namespace mdtp::cost {

enum class PipelineSchedule { gpipe, one_f_one_b, interleaved };
const char* pipeline_schedule_name(PipelineSchedule schedule);  // "gpipe", "1f1b", "interleaved"

struct PipelineConfig {
  int stages = 1;        // p
  int microbatches = 1;  // m
  int chunks = 1;        // v (interleaved only; 1 otherwise)
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
};

// Idle time over the ideal (bubble-free) compute time.
double bubble_over_ideal(const PipelineConfig& config);
// Idle time as a fraction of the whole step.
double bubble_fraction_of_total(const PipelineConfig& config);
// Per stage r = 0 … p−1: micro-batch forwards (interleaved: chunk passes) whose activations are
// held at the peak.
std::vector<int> peak_in_flight(const PipelineConfig& config);

}  // namespace mdtp::cost
