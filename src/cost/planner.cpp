#include "cost/planner.hpp"

#include <algorithm>
#include <map>
#include <optional>

#include "core/error.hpp"

namespace mdtp::cost {

namespace {

struct TpShape {
  TpMode mode;
  int tp, depth;
};

std::vector<TpShape> tp_shapes(const PlanRequest& r) {
  const std::vector<TpMode> all = {TpMode::d1, TpMode::d1_sp, TpMode::d2, TpMode::d2p5, TpMode::d3};
  const std::vector<TpMode>& modes = r.modes.empty() ? all : r.modes;
  auto wanted = [&](TpMode m) { return std::find(modes.begin(), modes.end(), m) != modes.end(); };
  std::vector<TpShape> out;
  for (int tp = 1; tp <= std::min(r.max_tp, r.gpus); ++tp) {
    if (r.gpus % tp != 0) continue;
    // tp = 1 is the same for every mode: listed once, as 1d.
    if (wanted(TpMode::d1) || (tp == 1 && !modes.empty())) out.push_back({TpMode::d1, tp, 1});
    if (tp == 1) continue;
    if (wanted(TpMode::d1_sp)) out.push_back({TpMode::d1_sp, tp, 1});
    for (int q = 2; q * q <= tp; ++q) {
      if (wanted(TpMode::d2) && q * q == tp) out.push_back({TpMode::d2, tp, 1});
      if (wanted(TpMode::d3) && q * q * q == tp) out.push_back({TpMode::d3, tp, 1});
      if (wanted(TpMode::d2p5) && tp % (q * q) == 0 && tp / (q * q) >= 2) out.push_back({TpMode::d2p5, tp, tp / (q * q)});
    }
  }
  return out;
}

std::vector<std::pair<ScheduleKind, int>> schedules(const StepConfig& c) {
  if (c.pp == 1) return {{ScheduleKind::one_f_one_b, 1}};
  std::vector<std::pair<ScheduleKind, int>> out = {{ScheduleKind::gpipe, 1}, {ScheduleKind::one_f_one_b, 1}};
  if (c.microbatches() >= c.pp) out.push_back({ScheduleKind::zb_h1, 1});  // its W passes fill a full pipe
  const std::int64_t per_stage = c.layers_per_stage();
  if (c.microbatches() % c.pp == 0)
    for (int v = 2; v <= per_stage; ++v)
      if (per_stage % v == 0) out.push_back({ScheduleKind::interleaved, v});
  return out;
}

// The ZeRO variants searched, as (stage, reduce per micro-batch).  With one micro-batch the two
// ways of reducing are the same step: listed once.  With several, ZeRO-2 reducing once per step
// holds its shards and, inside the step, every full gradient bucket (step_memory.hpp): stage 1's
// traffic with more memory, never the better choice, so only its per-micro-batch form is listed;
// ZeRO-3 is listed both ways (reducing once saves m−1 reduce-scatters, per micro-batch saves the
// full buckets).  ZeRO-3 keeping its gathered parameters for the step is not listed: it then holds
// every parameter in full for the step, as ZeRO-2 does, plus its shard, for ZeRO-2's traffic (one
// gather per step, the same reductions); `mdtp plan --zero-keep-params` evaluates one.
// With a pipeline as without: the engine runs every stage under every schedule, and the step
// model replays the schedule for the buckets it holds (step_memory.hpp).
std::vector<std::pair<int, bool>> zero_choices(const std::vector<int>& stages, std::int64_t micro_batches) {
  std::vector<std::pair<int, bool>> out;
  for (int zero : stages) {
    if (zero < 2 || micro_batches == 1) {
      out.push_back({zero, false});
      continue;
    }
    if (zero == 3) out.push_back({zero, false});
    out.push_back({zero, true});
  }
  return out;
}

}  // namespace

PlanResult plan(const PlanRequest& r, const Cluster& cluster) {
  require(r.gpus >= 1, "the planner needs gpus >= 1; got ", r.gpus);
  require(r.global_batch >= 1, "the planner needs a global batch >= 1; got ", r.global_batch);
  StepConfig base;
  base.model = r.model;
  base.global_batch = r.global_batch;
  base.dtype = r.dtype;
  base.dropout = r.dropout;
  base.overlap = r.overlap;
  base.attention_keeps_probabilities = r.attention_keeps_probabilities;
  validate(base);  // the model itself
  const std::vector<Recompute> recomputes =
      r.recomputes.empty() ? std::vector<Recompute>{Recompute::none, Recompute::selective, Recompute::full} : r.recomputes;
  const std::vector<int> zeros = r.zero_stages.empty() ? std::vector<int>{0, 1, 2, 3} : r.zero_stages;

  PlanResult result;
  for (const TpShape& shape : tp_shapes(r)) {
    // The layer costs depend on the shape and the micro-batch only: shared by every pp, dp, schedule.
    std::map<std::int64_t, std::optional<LayerCosts>> by_micro_batch;
    for (int pp = 1; pp <= r.gpus / shape.tp; ++pp) {
      if ((r.gpus / shape.tp) % pp != 0 || r.model.layers % pp != 0) continue;
      const int dp = r.gpus / (shape.tp * pp);
      if (r.global_batch % dp != 0) continue;
      std::optional<Placement> placement;
      for (std::int64_t b = 1; b <= std::min(r.max_micro_batch, r.global_batch / dp); b *= 2) {
        if ((r.global_batch / dp) % b != 0) continue;
        auto [slot, fresh] = by_micro_batch.try_emplace(b);
        if (fresh) {
          try {
            slot->second = layer_costs(r.model, shape.mode, shape.tp, shape.depth, b, r.dtype, r.dropout, cluster);
          } catch (const Error&) {
            ++result.refused;  // a shape this mode's layouts cannot hold
          }
        }
        const std::optional<LayerCosts>& costs = slot->second;
        if (!costs) continue;
        StepConfig c = base;
        c.mode = shape.mode;
        c.tp = shape.tp;
        c.depth = shape.depth;
        c.pp = pp;
        c.dp = dp;
        c.micro_batch = b;
        if (!placement) placement = place(c, cluster);
        for (const auto& [schedule, chunks] : schedules(c)) {
          c.schedule = schedule;
          c.chunks = chunks;
          for (const auto& [zero, per_micro_batch] : zero_choices(zeros, c.microbatches())) {
            if (zero > 0 && dp == 1) continue;  // nothing to shard over
            c.zero = zero;
            c.zero_reduce_per_micro_batch = per_micro_batch;
            for (Recompute recompute : recomputes) {
              if (recompute == Recompute::selective && !c.attention_keeps_probabilities) continue;
              c.recompute = recompute;
              StepEstimate e = estimate_step(c, *costs, *placement, cluster);
              ++result.considered;
              if (!e.fits) {
                ++result.too_big;
                continue;
              }
              result.ranked.push_back(std::move(e));
            }
          }
        }
      }
    }
  }
  std::stable_sort(result.ranked.begin(), result.ranked.end(),
                   [](const StepEstimate& a, const StepEstimate& b) { return a.step_seconds < b.step_seconds; });
  return result;
}

}  // namespace mdtp::cost
