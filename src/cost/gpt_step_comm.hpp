#pragma once
// The byte-exact communication of one whole training step of a GPT-2 or a Llama on one rank, as
// `mdtp train` runs it (src/train/trainer.cpp): every collective and point-to-point call, per (phase, group, op),
// derived from the algorithms and the shared pure plans — the stage partition, the pipeline
// schedule and the ZeRO bucket plan (src/plan) — never from a ledger.  The ledger of a real step
// equals it on every rank (tests/step_comm); the trainer writes it beside the measurement.
//
// What one step issues, per rank of pipeline stage r (docs/performance-model.md, "The whole-step
// byte plan"):
//   forward, backward  per micro-batch and per chunk of the stage: each block's attention, MLP
//                      and two norms (plan_step of those layers, at the family's widths:
//                      block_widths.hpp), the embedding on virtual stage 0, the final norm + LM
//                      head + cross-entropy on the last one (a tied and an untied head issue the
//                      same calls: only whose table they multiply by differs)
//   pipeline           per micro-batch and chunk: the residual shard received and sent forward,
//                      its gradient received and sent backward (send/recv over `pp`); where the
//                      residual is replicated over tp (1D), only a 1/tp row slice crosses and the
//                      receiver all-gathers it over tp in this phase
//   grad-sync          ZeRO 0: per parameter, its partial-sum groups then dp (reduce_gradients);
//                      ZeRO 1–3: per bucket of the bucket plan, a reduce-scatter over its shard
//                      group (dp; dp × depth for 2.5D weights) and the partial-sum all-reduces of
//                      the shard (the tied wte over `embedding`; an untied head's weight is held by
//                      its stage alone and summed over nothing)
//   loss               the last stage sums its loss over the logits' row split and dp; a
//                      broadcast over pp gives it to every stage
//   optimizer          the gradient norm (f64 all-reduce over dp at ZeRO ≥ 1, then tp-pp); ZeRO
//                      1–2 all-gather every bucket's updated values over its shard group
//   param-gather       ZeRO 3: the bucket all-gathers around each unit's forward and
//                      backward-input passes, replayed from the schedule's action list exactly
//                      as the engine acquires, prefetches and frees them
// Ranks of one stage issue the same calls (the TP and DP coordinates change only roots and
// peers), so a plan is per stage.  Group sizes of one rank are skipped as the code skips them.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "comm/ledger.hpp"
#include "cost/cost_model.hpp"
#include "cost/step_config.hpp"
#include "mesh/topology.hpp"
#include "plan/bucket_plan.hpp"
#include "plan/schedule.hpp"
#include "plan/stage_partition.hpp"
#include "spec/run_spec.hpp"
#include "tp/context.hpp"

namespace mdtp::cost {

// One training step as the trainer runs it: the run spec (every size and dp resolved; the plan
// reads the model's shape, the layout and schedule, ZeRO, full recomputation — selective
// recomputation communicates nothing — and the parameters' dtype) and the engine's choices the
// spec leaves to it.
struct StepCommConfig {
  RunSpec spec;
  TpOptions options{};              // the TP context's options (the trainer uses the defaults)
  std::int64_t align_bytes = 64;    // ZeRO: start of every parameter and shard inside a bucket

  // world tp·pp·dp, the mode and 2.5D's depth.
  MeshConfig mesh() const { return mesh_config(spec.layout, spec.layout.world(), spec.model.kv()); }
  // b: sequences per micro-batch per replica, global batch / (dp · m).
  std::int64_t micro_batch() const { return spec.micro_batch_size(); }
};

// One kind of call and how many times the step issues it on this rank.
struct CountedCall {
  // "block", "embedding", "head", "boundary", or the phase's name for the step-level calls (loss,
  // grad-sync, optimizer, param-gather).
  std::string part;
  PlannedCall call;
  std::int64_t count = 0;
};

struct StepCommPlan {
  int stage = 0;
  std::vector<CountedCall> calls;
  // Totals per (phase, group, op) exactly as CommLedger::summary() totals a rank's ledger.
  std::map<LedgerKey, LedgerTotals> totals() const;
  std::int64_t logical_bytes() const;  // over every call
};

// The schedule of a configuration (the trainer builds the same); its partition is
// stage_partition(config.spec) (plan/stage_partition.hpp).
Schedule step_schedule(const StepCommConfig& config);

// The parameters a stage's model holds, in the order GptModel::parameters() lists them (units
// ascending; in the head unit a tied head's wte copy first when the stage lacks the embedding, the
// final norm, an untied head's lm_head.weight last), under the family's names (parameter_names.hpp),
// with their shard sizes, the partial-sum groups of more than one rank, the weight-decay flag,
// the dtype and the unit: the ZeRO engine's bucket-plan input, derived from the configuration.
std::vector<BucketInput> stage_parameters(const StepCommConfig& config, int stage);
// The ZeRO bucket plan of a stage (the engine's options: dp shards, the cap, the alignment,
// unit-aligned buckets at stage 3).
BucketPlan stage_bucket_plan(const StepCommConfig& config, int stage);

// ZeRO-3's parameter all-gathers of one step on a rank of `stage`, one entry per bucket of the
// stage's bucket plan: its padded elements, dtype and shard-group size, and how often the step
// gathers it (the param-gather calls of plan_step_comm, replayed the same way, without the rest
// of the plan; empty below ZeRO-3 or with dp 1).  The step-time model prices the same calls pass
// by pass (zero3_gather_passes, below).
struct GatherCall {
  std::int64_t elements = 0;
  DType dtype = DType::f32;
  int group_size = 1;
  std::int64_t count = 0;
};
std::vector<GatherCall> zero3_gather_calls(const StepCommConfig& config, int stage);
// The same gathers pass by pass, in the stage's pass order (what the time model needs: a prefetch
// hides only under the one pass it was started in): per unit pass, the all-gathers it starts when
// it acquires its buckets — nothing prefetched them, so it waits for all of them — and those it
// starts for the next pass, which run under it.  Each GatherCall has count 1.
struct PassGathers {
  int unit = 0;
  int direction = +1;  // +1 forward, −1 backward-input (plan/unit_passes.hpp)
  int action = 0;      // the index of the schedule action (F, B or BW) on the stage the pass belongs to
  std::vector<GatherCall> waited, ahead;
};
std::vector<std::vector<PassGathers>> zero3_gather_passes(const StepCommConfig& config, const std::vector<int>& stages);

// Every call of one step on a rank of pipeline stage `stage`.  An mdtp::Error naming the value
// for a configuration the trainer would refuse on shape grounds (Geometry, the partition, the
// schedule, the ZeRO options).
StepCommPlan plan_step_comm(const StepCommConfig& config, int stage);

// The plan as text: one line per counted call (part, phase, group, op, elements × count, bytes).
std::string format_step_comm(const StepCommPlan& plan);

}  // namespace mdtp::cost
