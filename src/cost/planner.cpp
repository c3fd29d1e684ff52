#include "cost/planner.hpp"

#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>

#include <cmath>

#include "core/error.hpp"
#include "cost/offload_cost.hpp"
#include "spec/run_spec_json.hpp"

namespace mdtp::cost {

namespace {

struct TpShape {
  TpMode mode;
  int tp, depth;
};

bool allowed(const std::optional<int>& fixed, int value) { return !fixed || *fixed == value; }

std::vector<TpShape> tp_shapes(const PlanRequest& r) {
  const std::vector<TpMode> all = {TpMode::d1, TpMode::d1_sp, TpMode::d2, TpMode::d2p5, TpMode::d3};
  const std::vector<TpMode>& modes = r.modes.empty() ? all : r.modes;
  auto wanted = [&](TpMode m) { return std::find(modes.begin(), modes.end(), m) != modes.end(); };
  std::vector<TpShape> out;
  for (int tp = 1; tp <= std::min(r.max_tp, r.gpus); ++tp) {
    if (r.gpus % tp != 0 || !allowed(r.fixed.tp, tp)) continue;
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
  std::erase_if(out, [&](const TpShape& s) { return !allowed(r.fixed.depth, s.depth); });
  return out;
}

std::vector<std::pair<ScheduleKind, int>> all_schedules(const StepConfig& c) {
  if (c.spec.layout.pp == 1) return {{ScheduleKind::one_f_one_b, 1}};
  std::vector<std::pair<ScheduleKind, int>> out = {{ScheduleKind::gpipe, 1}, {ScheduleKind::one_f_one_b, 1}};
  const std::int64_t p = c.spec.layout.pp;
  if (c.microbatches() >= p) {  // their W passes fill a full pipe
    out.push_back({ScheduleKind::zb_h1, 1});
    out.push_back({ScheduleKind::zb_h2, 1});
    out.push_back({ScheduleKind::zb_v, 2});
  }
  if (c.microbatches() >= 2 * p) out.push_back({ScheduleKind::dualpipev, 2});  // DualPipeV's m >= 2p
  if (p % 2 == 0 && c.microbatches() % 2 == 0 && c.microbatches() >= 2 * p)
    out.push_back({ScheduleKind::dualpipe, 2});  // DualPipe's even p and m, m >= 2p
  const std::int64_t per_stage = c.layers_per_stage();
  if (c.microbatches() % c.spec.layout.pp == 0)
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
// The schedules of a configuration the request allows.
std::vector<std::pair<ScheduleKind, int>> schedules(const StepConfig& c, const PlanRequest::Fixed& fixed) {
  std::vector<std::pair<ScheduleKind, int>> out = all_schedules(c);
  std::erase_if(out, [&](const std::pair<ScheduleKind, int>& s) {
    return (fixed.schedule && s.first != *fixed.schedule) || !allowed(fixed.chunks, s.second) ||
           (fixed.group_size && s.first != ScheduleKind::interleaved);
  });
  return out;
}

// The micro-batch sizes tried for a replica batch: powers of two up to the limit, or the one the
// request fixes (by size, or by the number of micro-batches).
std::vector<std::int64_t> micro_batch_sizes(const PlanRequest& r, std::int64_t replica_batch) {
  std::vector<std::int64_t> out;
  if (r.fixed.micro_batch_size) {
    if (replica_batch % *r.fixed.micro_batch_size == 0) out.push_back(*r.fixed.micro_batch_size);
    return out;
  }
  if (r.fixed.micro_batches) {
    if (replica_batch % *r.fixed.micro_batches == 0) out.push_back(replica_batch / *r.fixed.micro_batches);
    return out;
  }
  for (std::int64_t b = 1; b <= std::min(r.max_micro_batch, replica_batch); b *= 2)
    if (replica_batch % b == 0) out.push_back(b);
  return out;
}

std::vector<std::pair<int, bool>> zero_choices(const std::vector<int>& stages, std::int64_t micro_batches,
                                               const PlanRequest::Fixed& fixed) {
  std::vector<std::pair<int, bool>> out;
  if (fixed.zero_reduce_per_micro_batch) {  // asked for: every stage it applies to reduces that way
    for (int zero : stages) out.push_back({zero, zero >= 2 && *fixed.zero_reduce_per_micro_batch});
    return out;
  }
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

std::string fixed_text(const PlanRequest& r) {
  std::string t;
  auto add = [&t](const char* name, const auto& v) {
    if (v) t += fmt::format(" {} {}", name, *v);
  };
  add("--tp", r.fixed.tp);
  add("--tp-depth", r.fixed.depth);
  add("--pp", r.fixed.pp);
  add("--dp", r.fixed.dp);
  return t.empty() ? std::string() : " with" + t;
}

// The first condition that left nothing, in the order the search applies them.
std::string why_empty(const PlanRequest& r, const PlanResult& result, std::int64_t shapes, std::int64_t layouts,
                      std::int64_t batch_splits, std::int64_t with_schedule) {
  if (shapes == 0)
    return fmt::format("no tensor-parallel size of the modes asked (up to --max-tp {}) divides {} GPUs{}", r.max_tp,
                       r.gpus, fixed_text(r));
  if (layouts == 0)
    return fmt::format("no tp x pp x dp split of {} GPUs{} splits the {} layers into equal stages", r.gpus,
                       fixed_text(r), r.base.spec.model.layers);
  if (batch_splits == 0)
    return fmt::format("no tp x pp x dp split of {} GPUs{} has a dp that divides the global batch {} into the "
                       "micro-batches asked",
                       r.gpus, fixed_text(r), r.base.spec.global_batch);
  if (with_schedule == 0) return "no schedule asked fits the layouts left (zb-h1 needs m >= pp; interleaved m a multiple of pp)";
  if (result.considered == 0)
    return fmt::format("every layout left ({} tried) is refused by the modes' shapes or by the fixed options",
                       result.refused);
  return fmt::format("none of the {} configurations evaluated fits in the GPU's memory", result.considered);
}

}  // namespace

PlanResult plan(const PlanRequest& r, const Cluster& cluster_file) {
  require(r.gpus >= 1, "the planner needs gpus >= 1; got ", r.gpus);
  const Cluster cluster = for_job(cluster_file, r.gpus);
  const ModelShape& model = r.base.spec.model;
  const std::int64_t global_batch = r.base.spec.global_batch;
  require(global_batch >= 1, "the planner needs a global batch >= 1; got ", global_batch);
  // What each configuration sets for itself, cleared: the layout, the ZeRO stage with its
  // per-stage options (asked for through r.fixed) and the recomputation.
  StepConfig base = r.base;
  base.spec.layout = ParallelLayout{};
  base.spec.zero.stage = 0;
  base.spec.zero.reduce_per_micro_batch = base.spec.zero.keep_parameters = false;
  // ZeRO-Offload asked for: every stage it applies to (1-3) offloads, stage 0 is not searched.
  const bool offload = r.base.spec.zero.offload;
  base.spec.zero.offload = false;
  if (offload) {
    validate_offload_pricing(r.base);
    require_offload_hardware(cluster);
  }
  base.spec.recompute = Recompute::none;
  validate(base);  // the model itself
  const std::vector<Recompute> recomputes =
      r.recomputes.empty() ? std::vector<Recompute>{Recompute::none, Recompute::selective, Recompute::full} : r.recomputes;
  const std::vector<int> zeros = r.zero_stages.empty() ? std::vector<int>{0, 1, 2, 3} : r.zero_stages;

  PlanResult result;
  // How far the search got, for the one sentence that explains an empty one.
  std::int64_t shapes = 0, layouts = 0, batch_splits = 0, with_schedule = 0;
  for (const TpShape& shape : tp_shapes(r)) {
    ++shapes;
    // The layer costs depend on the shape and the micro-batch only: shared by every pp, dp, schedule.
    std::map<std::int64_t, std::optional<LayerCosts>> by_micro_batch;
    for (int pp = 1; pp <= r.gpus / shape.tp; ++pp) {
      const bool even = r.fixed.pp_layers.empty();
      if ((r.gpus / shape.tp) % pp != 0 || (even && model.layers % pp != 0) || !allowed(r.fixed.pp, pp)) continue;
      const int dp = r.gpus / (shape.tp * pp);
      if (!allowed(r.fixed.dp, dp)) continue;
      ++layouts;
      if (global_batch % dp != 0) continue;
      std::optional<Placement> placement;
      for (const std::int64_t b : micro_batch_sizes(r, global_batch / dp)) {
        ++batch_splits;
        StepConfig c = base;
        c.spec.layout.mode = shape.mode;
        c.spec.layout.tp = shape.tp;
        c.spec.layout.depth = shape.depth;
        c.spec.layout.pp = pp;
        c.spec.layout.dp = dp;
        c.spec.layout.pp_layers = r.fixed.pp_layers;
        c.set_micro_batch(b);
        auto [slot, fresh] = by_micro_batch.try_emplace(b);
        if (fresh) {
          try {
            slot->second = layer_costs(c, cluster);
          } catch (const Error&) {
            ++result.refused;  // a shape this mode's layouts cannot hold
          }
        }
        const std::optional<LayerCosts>& costs = slot->second;
        if (!costs) continue;
        if (!placement) placement = place(c, cluster);
        for (const auto& [schedule, chunks] : schedules(c, r.fixed)) {
          ++with_schedule;
          c.spec.layout.schedule = schedule;
          c.spec.layout.chunks = chunks;
          c.spec.layout.stage_mapping = stage_mapping_of(schedule);
          c.spec.layout.group_size = schedule == ScheduleKind::interleaved ? r.fixed.group_size.value_or(0) : 0;
          // ZeRO-3's gathers, priced call by call, depend on the schedule, not on when gradients are
          // reduced nor on the recomputation policy: priced once per schedule.
          bool zero3_priced = false;
          std::optional<Zero3Timeline> zero3_gathers_of_schedule;  // none: the engine's bucket plan refuses it
          for (const auto& [zero, per_micro_batch] : zero_choices(zeros, c.microbatches(), r.fixed)) {
            // Nothing to shard over at dp 1, but ZeRO-Offload's host update (stage 1 stands for all).
            if (zero > 0 && dp == 1 && r.zero_stages.empty() && !(offload && zero == 1)) continue;
            if (offload && zero == 0) continue;
            c.spec.zero.stage = zero;
            c.spec.zero.offload = offload;
            c.spec.zero.reduce_per_micro_batch = per_micro_batch;
            c.spec.zero.keep_parameters = zero == 3 && r.fixed.zero_keep_parameters.value_or(false);
            static const Zero3Timeline no_gathers;
            const Zero3Timeline* zero3_gathers = &no_gathers;
            if (zero == 3) {
              if (!zero3_priced) {
                zero3_priced = true;
                try {
                  zero3_gathers_of_schedule = zero3_gather_timeline(c, *placement, cluster);
                } catch (const Error&) {
                }
              }
              if (!zero3_gathers_of_schedule) {
                ++result.refused;
                continue;
              }
              zero3_gathers = &*zero3_gathers_of_schedule;
            }
            for (Recompute recompute : recomputes) {
              if (recompute == Recompute::selective && !c.attention_keeps_probabilities && r.recomputes.empty()) continue;
              c.spec.recompute = recompute;
              StepEstimate e;
              try {
                e = estimate_step(c, *costs, *placement, cluster, *zero3_gathers);  // validates the configuration first
              } catch (const Error&) {
                ++result.refused;  // a combination an engine would refuse (a fixed axis the others do not fit)
                continue;
              }
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
  if (result.ranked.empty()) result.why_empty = why_empty(r, result, shapes, layouts, batch_splits, with_schedule);
  std::stable_sort(result.ranked.begin(), result.ranked.end(),
                   [](const StepEstimate& a, const StepEstimate& b) { return a.step_seconds < b.step_seconds; });
  return result;
}

std::vector<LayoutRow> collapse_layouts(const std::vector<StepEstimate>& ranked) {
  // Everything but the micro-batch size.
  auto key = [](const StepConfig& c) {
    RunSpec s = c.spec;
    s.layout.micro_batches = 0;
    return to_json(s).dump();
  };
  std::vector<LayoutRow> rows;
  std::map<std::string, std::size_t> row_of;
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    const std::string k = key(ranked[i].config);
    const auto [it, fresh] = row_of.try_emplace(k, rows.size());
    if (fresh) {
      rows.push_back({i, {ranked[i].config.micro_batch()}});
      continue;
    }
    LayoutRow& row = rows[it->second];
    const double best = ranked[row.index].step_seconds;
    if (std::abs(ranked[i].step_seconds - best) <= 1e-6 * best) row.micro_batch_sizes.push_back(ranked[i].config.micro_batch());
  }
  for (LayoutRow& row : rows) std::sort(row.micro_batch_sizes.begin(), row.micro_batch_sizes.end());
  return rows;
}

std::string layout_label(const StepConfig& c) {
  const ParallelLayout& l = c.spec.layout;
  if (l.tp == 1) return l.pp == 1 ? "dp only" : "no TP";
  if (l.mode == TpMode::d2p5) return fmt::format("2.5d d={}", l.depth);
  return tp_mode_name(l.mode);
}

}  // namespace mdtp::cost
