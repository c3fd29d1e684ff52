#pragma once
// Pipeline schedules as data: a pure function per schedule returns every stage's ordered list of
// actions — F (forward), B (backward-input pass), W (weight pass) or BW (the fused backward) of a
// (micro-batch, chunk) — for p stages, m micro-batches and v chunks per stage.  The executor
// (src/pipeline) runs them, the simulator (schedule_sim.hpp) proves they complete and times them,
// `mdtp schedule` prints them and the cost model reads its transfers off them.  The rules, with
// their sources, are in docs/theory.md §3.
//
//   gpipe        all m forwards, then all m backwards (in micro-batch order).
//   1f1b         Megatron's non-interleaved schedule (PipeDream-flush): stage r runs
//                W = min(p − r − 1, m) warm-up forwards, then m − W (forward, backward) pairs,
//                then W cool-down backwards.
//   interleaved  Megatron-Core's interleaved 1F1B with v ≥ 2 chunks and micro-batch group size N
//                (default p): the forward passes run groups of N micro-batches through chunks
//                0 … v−1 (the last group takes the m mod N left over), the backward passes the same
//                order with the chunk reversed; warm-up min(2(p − r − 1) + (v − 1)·N, m·v) forwards,
//                then (forward, backward) pairs, then the rest of the backwards.  Needs p ≥ 2,
//                p ≤ N ≤ m, and m mod N either 0 or ≥ p (Megatron-Core's rule; older Megatron and
//                Colossal-AI's legacy engine asked m to be a multiple of p).
//   zb-h1        Qi et al.'s ZB-H1 (Zero Bubble Pipeline Parallelism, ICLR 2024): the backward
//                split into B and W, the W passes deferred into what would be bubbles, at 1F1B's
//                peak activation memory.  Stage r: p − r − 1 forwards; r (F, B) pairs; F, B, W;
//                m − p (F, B, W) triples; p − r − 1 (B, W) pairs; r W's.  Needs m ≥ p.  With unit
//                pass times its bubble is p − 1 per stage against 3(p − 1) for 1F1B.
#include <string>
#include <string_view>
#include <vector>

// ScheduleKind, parse_schedule and schedule_name: the run spec names schedules without their rules.
#include "spec/schedule_kind.hpp"

namespace mdtp {

enum class PassKind : char { F = 'F', B = 'B', W = 'W', BW = 'X' };
const char* pass_name(PassKind kind);  // "F", "B", "W", "BW"

struct Action {
  PassKind op = PassKind::F;
  int microbatch = 0;
  int chunk = 0;
  bool operator==(const Action&) const = default;
};

struct Schedule {
  ScheduleKind kind = ScheduleKind::one_f_one_b;
  int stages = 1;         // p
  int micro_batches = 1;  // m
  int chunks = 1;         // v
  int group_size = 1;     // N (interleaved), else 1
  std::vector<std::vector<Action>> actions;  // per stage

  // The virtual stage of (stage, chunk): c·p + r.
  int virtual_stage(int stage, int chunk) const { return chunk * stages + stage; }
};

// An mdtp::Error naming the value for a configuration the schedule refuses.  group_size 0: p.
Schedule make_schedule(ScheduleKind kind, int stages, int micro_batches, int chunks = 1, int group_size = 0);

// The forwards stage r runs before its first backward-input pass: the warm-up forwards plus the
// steady phase's first one (1F1B: min(p − r − 1, m) + 1, or m when every forward is warm-up).
int forwards_before_first_backward(const Schedule& schedule, int stage);

// Per chunk, the index in stage `stage`'s action list of its last weight pass (W or BW) of the
// step, or −1: where that chunk's gradients become complete (the pipeline engine reports them
// there, and the ZeRO engine starts their reduction).
std::vector<int> last_weight_actions(const Schedule& schedule, int stage);

// How a fused backward (BW) of `chunk` on `stage` runs.  On virtual stage 0 there is no input
// gradient to send upstream, so it runs unit by unit, each unit's backward-input pass followed by
// its weight pass (a unit's gradients are complete as early as possible, so ZeRO-2/3 reduce and free
// them while the units below still run).  Elsewhere all backward-input passes run first, the input
// gradient is sent, and then the weight passes: the stage upstream waits for that gradient, not
// for this stage's weight passes.
bool fused_backward_unit_by_unit(const Schedule& schedule, int stage, int chunk);

}  // namespace mdtp
