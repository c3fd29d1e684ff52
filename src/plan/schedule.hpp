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
//   zb-h2        the same paper's ZB-H2: more warm-up forwards (2(p − r) − 1 on stage r) fill the
//                bubble before the first B, and the W passes are reordered so that every stage
//                works without a gap from its first action to its last (a parallelogram), holding
//                at most 2p − 1 contexts.  Built here as the order a unit-time list scheduler gives
//                (each stage runs, at each unit, a ready B, else a ready F within its bounds, else
//                its oldest pending W).  The paper's zero bubble also needs its optimizer
//                post-validation (the next step's forwards start before this step's norm is known);
//                mdtp steps synchronously (norm, clip, update), so the idle p − 1 units per stage
//                before and after the parallelogram remain: (p − 1)·T_F, ZB-H1's at T_B = T_W.
//                Needs m ≥ p.
//   zb-v         the ZB-V schedule (two chunks per stage in V order: stage r runs virtual stages r
//                and 2p − 1 − r, so the embedding and the head both sit on stage 0): the order of
//                the zero-bubble authors' greedy at unit costs (plan/zb_v_order.hpp).  Needs p ≥ 2,
//                m ≥ p.
//   dualpipev    DeepSeek's DualPipeV (the V-shaped, "cut-in-half" DualPipe; the DualPipe
//                repository's dualpipev.py): the same V placement, eight phases per stage whose
//                middle pairs a forward of one chunk with the full backward of the other (an F&B
//                pair, marked `overlapped` on the forward).  mdtp runs a pair's two passes one
//                after the other, since its TP collectives block: the pair costs F + B + W.
//                Needs p ≥ 2, m ≥ 2p.
//   dualpipe     DeepSeek's DualPipe (DeepSeek-V3; dualpipe.py): the mirrored mapping — stage r
//                holds positions r and p − 1 − r of the model, so two copies of the parameters;
//                micro-batches 0 … m/2 − 1 enter at stage 0 and run down, the others enter at
//                stage p − 1 and run up; the same eight phases as DualPipeV on the half-rank
//                min(r, p − 1 − r) of p/2, with F&B pairs.  Needs p even, m even, m ≥ 2p.
#include <string>
#include <string_view>
#include <vector>

// ScheduleKind, parse_schedule and schedule_name: the run spec names schedules without their rules.
#include "plan/virtual_stage.hpp"
#include "spec/run_spec.hpp"  // StageMapping
#include "spec/schedule_kind.hpp"

namespace mdtp {

enum class PassKind : char { F = 'F', B = 'B', W = 'W', BW = 'X' };
const char* pass_name(PassKind kind);  // "F", "B", "W", "BW"

struct Action {
  PassKind op = PassKind::F;
  int microbatch = 0;
  int chunk = 0;
  // A forward that DualPipeV pairs with the next action (a full backward of the other chunk), to
  // hide one pass's communication under the other's compute.  The executor runs the two in turn.
  bool overlapped = false;
  bool operator==(const Action&) const = default;
};

struct Schedule {
  ScheduleKind kind = ScheduleKind::one_f_one_b;
  int stages = 1;         // p
  int micro_batches = 1;  // m
  int chunks = 1;         // v
  int group_size = 1;     // N (interleaved), else 1
  StageMapping mapping = StageMapping::round_robin;
  std::vector<std::vector<Action>> actions;  // per stage

  // Which stage runs which virtual stage (plan/virtual_stage.hpp).
  StageMap map() const { return StageMap(mapping, stages, chunks); }
  int virtual_stages() const { return stages * chunks; }
  int virtual_stage(int stage, int chunk) const { return map().virtual_stage(stage, chunk); }
  int stage_of(int virtual_stage) const { return map().stage_of(virtual_stage); }
  int chunk_of(int virtual_stage) const { return map().chunk_of(virtual_stage); }
  bool first(int virtual_stage) const { return map().first(virtual_stage); }  // embeds
  bool last(int virtual_stage) const { return map().last(virtual_stage); }    // the head and the loss
  // Whether micro-batch i runs through virtual stage vs: always, but under a mirrored mapping,
  // where micro-batches 0 … m/2 − 1 take route 0 (down) and the rest route 1 (up).
  bool visits(int microbatch, int virtual_stage) const;
  // The micro-batches stage `stage`'s chunk runs: m, or m/2 under a mirrored mapping.
  int micro_batches_through(int stage, int chunk) const;
  // The stages that compute a loss (run a last virtual stage): p − 1; 0 when V-shaped; p − 1 and
  // 0 when mirrored.
  std::vector<int> loss_stages() const;
  // The direction an action's activations travel across stages: +1 towards higher stages (every
  // chunk of a round-robin schedule), −1 back (chunk 1 of a V, the up route of a mirror).
  // Gradients travel the other way.
  int direction(int stage, int chunk) const { return map().direction(stage, chunk); }
  // Copies of the model's parameters over the stages: 2 under a mirrored mapping, else 1.
  int parameter_copies() const { return mapping == StageMapping::mirrored ? 2 : 1; }
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

// How a fused backward (BW) of `chunk` on `stage` runs.  On a first virtual stage (position 0, the
// embedding) there is no input gradient to send upstream, so it runs unit by unit, each unit's backward-input pass followed by
// its weight pass (a unit's gradients are complete as early as possible, so ZeRO-2/3 reduce and free
// them while the units below still run).  Elsewhere all backward-input passes run first, the input
// gradient is sent, and then the weight passes: the stage upstream waits for that gradient, not
// for this stage's weight passes.
bool fused_backward_unit_by_unit(const Schedule& schedule, int stage, int chunk);

}  // namespace mdtp
