#pragma once
// The planner behind `mdtp plan`: every configuration of a GPT on `gpus` GPUs of a cluster that
// an engine could run and that fits in memory, ranked by the whole-step model's step time.
//
// Enumerated: mode and tp (1d and 1d-sp: tp a divisor of the GPUs up to max_tp; 2d: q²;
// 2.5d: d·q² with d ≥ 2; 3d: q³), pp (divides the layers and the GPUs), dp = gpus/(tp·pp),
// micro-batch (powers of two dividing the batch per replica), schedule (without a pipeline:
// plain accumulation, named 1f1b; with one: gpipe, 1f1b, zb-h1, interleaved with every v ≥ 2
// dividing the layers per stage; zb-h1 with m ≥ pp), ZeRO stage (0 without dp; with several
// micro-batches stage 2 reducing per micro-batch, stage 3 reducing once or per micro-batch; every
// stage with every schedule) and recomputation.  Shapes the layouts refuse (geometry, heads,
// whole sequences) are skipped, and so is every configuration whose memory exceeds the GPU's.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cost/cluster.hpp"
#include "cost/step_model.hpp"

namespace mdtp::cost {

struct PlanRequest {
  // What the search does not vary, as `mdtp cost` would price it: the model, the global batch, the
  // precision, dropout, the ZeRO options beyond the stage, and every step switch (the overlaps, the
  // attention kernel, the kernels' fusion, engine_kernels).  Its layout, ZeRO stage (with the
  // stage's reduce-per-micro-batch and keep-parameters options) and recomputation are the search's:
  // each configuration sets its own, as `fixed` and the lists below allow.
  StepConfig base;
  int gpus = 0;
  // Limits of the search (each list empty = all).
  int max_tp = 64;
  std::int64_t max_micro_batch = 16;
  std::vector<TpMode> modes;
  std::vector<Recompute> recomputes;
  std::vector<int> zero_stages;
  // Axes the user fixed (`mdtp plan --tp 8 --pp 8 …`): only configurations with these values are
  // searched; the rest is.  A mode, recomputation or ZeRO stage is fixed through the lists above.
  struct Fixed {
    std::optional<int> tp, depth, pp, dp, chunks, micro_batches;
    // The interleaved schedule's micro-batch group N (--group-size): only that schedule is searched.
    std::optional<int> group_size;
    std::optional<std::int64_t> micro_batch_size;
    std::optional<ScheduleKind> schedule;
    std::optional<bool> zero_reduce_per_micro_batch, zero_keep_parameters;
    // An uneven split (blocks per virtual stage); with it pp and chunks are fixed too.
    std::vector<int> pp_layers;
  } fixed;
};

struct PlanResult {
  std::vector<StepEstimate> ranked;  // feasible and fitting, quickest first
  std::int64_t considered = 0;       // configurations evaluated (valid shapes)
  std::int64_t refused = 0;          // (mode, tp, micro-batch) shapes the layouts refuse
  std::int64_t too_big = 0;          // valid but over the GPU memory
  // When nothing is ranked: which condition emptied the search, in one sentence naming the values.
  std::string why_empty;
};

PlanResult plan(const PlanRequest& request, const Cluster& cluster);

// The ranked configurations one row per layout: configurations that differ only in the micro-batch
// size are one layout, shown at its quickest; the sizes whose step time ties with it (within one
// part in a million) are listed beside it.  In rank order.
struct LayoutRow {
  std::size_t index = 0;                  // into PlanResult::ranked: the layout's quickest
  std::vector<std::int64_t> micro_batch_sizes;  // that tie, ascending
};
std::vector<LayoutRow> collapse_layouts(const std::vector<StepEstimate>& ranked);
// "dp only" without tensor or pipeline parallelism, "no TP" with a pipeline only, else the mode
// ("1d", "2.5d d=2", ...).
std::string layout_label(const StepConfig& config);

}  // namespace mdtp::cost
