#include "cost/pipeline_bubble.hpp"

#include <algorithm>
#include <optional>

#include "core/error.hpp"
#include "plan/schedule.hpp"
#include "plan/schedule_sim.hpp"

namespace mdtp::cost {

namespace {

// The schedules whose bubble has no closed form here: ZB-H2, ZB-V, DualPipeV and DualPipe are
// timed by simulating their action lists (plan/schedule_sim.hpp).
bool simulated(ScheduleKind kind) {
  return kind == ScheduleKind::zb_h2 || kind == ScheduleKind::zb_v || kind == ScheduleKind::dualpipev ||
         kind == ScheduleKind::dualpipe;
}

// Validated on every call, so a bad configuration never yields a number.
void check_sizes(const PipelineConfig& c) {
  require(c.stages >= 1, "a pipeline needs at least one stage; got p=", c.stages);
  require(c.microbatches >= 1, "a pipeline needs at least one micro-batch; got m=", c.microbatches);
  require(c.chunks >= 1, "a pipeline needs at least one model chunk per stage; got v=", c.chunks);
}

// The chunks of a schedule with a closed form.
int chunks_of(const PipelineConfig& c) {
  check_sizes(c);
  if (c.schedule != ScheduleKind::interleaved) {
    require(c.chunks == 1, "model chunks (v=", c.chunks, ") apply only to the interleaved schedule, not ",
            schedule_name(c.schedule));
    return 1;
  }
  // The schedule's own constraints (Megatron-Core's rule: p ≤ N ≤ m, m mod N either 0 or ≥ p),
  // refused by the one function that builds it (src/plan/schedule.hpp).
  make_schedule(ScheduleKind::interleaved, c.stages, c.microbatches, c.chunks, c.group_size);
  return c.chunks;
}

// A schedule's action lists, built once per call (to simulate it, to simulate what a send's latency
// adds, or to count the interleaved warm-up): make_schedule refuses what it cannot run (p ≥ 2,
// m ≥ p or 2p, its fixed chunks, an even p for DualPipe, Megatron-Core's group rule).
Schedule schedule_of(const PipelineConfig& c) {
  check_sizes(c);
  return make_schedule(c.schedule, c.stages, c.microbatches, c.chunks, c.group_size);
}

// The most idle stage's idle time, each chunk's passes at chunk_pass_times; an overlapped F&B pair
// costs F + B + W (no overlap).
double simulated_bubble_seconds(const Schedule& s, const StageTimes& t, double transfer) {
  const Simulation sim = simulate(s, chunk_pass_times(s, t), transfer);
  double worst = 0.0;
  for (double idle : sim.idle) worst = std::max(worst, idle);
  return worst;
}

void check_times(const StageTimes& t) {
  require(t.forward >= 0 && t.backward_input >= 0 && t.backward_weight >= 0,
          "stage times must be non-negative; got F=", t.forward, " B=", t.backward_input, " W=", t.backward_weight);
}

}  // namespace

PassTimes chunk_pass_times(const Schedule& schedule, const StageTimes& stage) {
  const double v = schedule.mapping == StageMapping::mirrored ? 1.0 : schedule.chunks;
  return PassTimes{stage.forward / v, stage.backward_input / v, stage.backward_weight / v};
}

double bubble_seconds(const PipelineConfig& c, const StageTimes& t, double transfer) {
  require(transfer >= 0, "a pipeline send's time must not be negative; got ", transfer, " s");
  if (simulated(c.schedule)) {
    const Schedule s = schedule_of(c);
    check_times(t);
    return simulated_bubble_seconds(s, t, transfer);
  }
  // With a latency the schedule is simulated; building it refuses what chunks_of refuses, so it is
  // built once and stands for that check.
  std::optional<Schedule> s;
  if (transfer > 0) s = schedule_of(c);
  const int v = s ? s->chunks : chunks_of(c);
  check_times(t);
  const double idle_stages = c.stages - 1.0;
  const double closed_form = c.schedule == ScheduleKind::zb_h1
                                 ? idle_stages * std::max(0.0, t.forward + t.backward_input - t.backward_weight)
                                 : idle_stages * (t.forward + t.backward_input + t.backward_weight) / v;
  if (transfer == 0) return closed_form;
  // The closed forms hold for instantaneous transfers; what a latency adds (once per boundary of the
  // fill and drain, or per cycle in 1F1B's steady state: pipeline_bubble.hpp) is read off the
  // simulated schedule, with and without it.  (Simulated without, GPipe, 1F1B and interleaved meet
  // their closed forms; ZB-H1's action order meets (p−1)(F+B−W) only where W fills its gaps exactly.)
  return closed_form + simulated_bubble_seconds(*s, t, transfer) - simulated_bubble_seconds(*s, t, 0.0);
}

// ZB-H1 with T_F = T_B = T_W: (p−1)(T_F+T_B−T_W) = (p−1)·T over m·3T of work, a third of 1F1B's.
static double zb_h1_share(const PipelineConfig& c) { return c.schedule == ScheduleKind::zb_h1 ? 1.0 / 3.0 : 1.0; }

double bubble_over_ideal(const PipelineConfig& c) {
  if (simulated(c.schedule))
    return simulated_bubble_seconds(schedule_of(c), StageTimes{1.0, 1.0, 1.0}, 0.0) / (3.0 * c.microbatches);
  const int v = chunks_of(c);
  return zb_h1_share(c) * (c.stages - 1.0) / (static_cast<double>(v) * c.microbatches);
}

double bubble_fraction_of_total(const PipelineConfig& c) {
  const double idle = bubble_over_ideal(c);
  return idle / (1.0 + idle);
}

std::vector<int> peak_in_flight(const PipelineConfig& c) {
  std::vector<int> out;
  if (simulated(c.schedule)) {  // (micro-batch, chunk) contexts from F to W, read off the order
    for (const PeakContexts& peak : peak_contexts(schedule_of(c))) out.push_back(peak.total);
    return out;
  }
  // The interleaved schedule is built once for every stage's warm-up count; building it refuses
  // what chunks_of refuses.
  std::optional<Schedule> interleaved;
  if (c.schedule == ScheduleKind::interleaved) interleaved = schedule_of(c);
  const int v = interleaved ? interleaved->chunks : chunks_of(c), p = c.stages, m = c.microbatches;
  for (int r = 0; r < p; ++r) {
    switch (c.schedule) {
      case ScheduleKind::gpipe: out.push_back(m); break;
      case ScheduleKind::one_f_one_b:
      case ScheduleKind::zb_h1: out.push_back(std::min(p - r, m)); break;
      case ScheduleKind::zb_h2:
      case ScheduleKind::zb_v:
      case ScheduleKind::dualpipev:
      case ScheduleKind::dualpipe: break;  // simulated above
      case ScheduleKind::interleaved: {
        // Megatron-Core's warm-up, min(2(p−r−1) + (v−1)·N, m·v) forwards, and the steady state's
        // first forward before the first backward.
        out.push_back(std::min(forwards_before_first_backward(*interleaved, r), m * v));
        break;
      }
    }
  }
  return out;
}

}  // namespace mdtp::cost
