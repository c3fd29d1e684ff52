#include "cost/step_model.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "cost/collective_sms.hpp"
#include "cost/chunked_overlap.hpp"
#include "cost/gpt_step_comm.hpp"
#include "cost/kernel_time.hpp"
#include "cost/model_flops.hpp"
#include "cost/offload_cost.hpp"
#include "cost/pipeline_bubble.hpp"
#include "plan/schedule.hpp"
#include "plan/schedule_sim.hpp"
#include "spec/names.hpp"

namespace mdtp::cost {

Placement place(const StepConfig& c, const Cluster& cluster) {
  MeshConfig mesh;
  mesh.world = c.gpus();
  mesh.tp = c.spec.layout.tp;
  mesh.pp = c.spec.layout.pp;
  mesh.tp_mode = c.spec.layout.mode;
  mesh.tp_depth = c.spec.layout.depth;
  mesh.ranks_per_node = cluster.gpus_per_node;
  const Topology topology(mesh);
  const int nics = cluster.nics_per_node;
  return {group_span(topology, group::tp, nics), group_span(topology, group::dp, nics),
          group_span(topology, group::pp, nics)};
}

namespace {

struct StageWork {
  PassCost forward, backward_input, backward_weight;
  double seconds() const { return forward.seconds() + backward_input.seconds() + backward_weight.seconds(); }
  PassCost total() const {  // the three passes of one micro-batch, summed
    PassCost t = forward;
    t += backward_input;
    t += backward_weight;
    return t;
  }
  double comm() const { return forward.comm_seconds + backward_input.comm_seconds + backward_weight.comm_seconds; }
};

// A unit's pass as it runs, its TP collectives beside `window` more seconds of GEMMs than its own
// (the weight-gradient GEMMs, under 1D's asynchronous backward collectives; else 0).  With
// --tp-comm-overlap (1D-SP only) they run in chunks under the pass's own GEMMs too (Transformer
// Engine's userbuffers).  What outlasts the GEMMs is exposed; while they run beside them, the SMs
// their kernels hold are lost to the GEMMs (collective_sms.hpp): TE's 16 for the reduce-scatters
// and the re-gather of X, NCCL's channels for 1D's asynchronous collectives.  comm_seconds is then
// what the collectives cost the step, both parts.
PassCost as_run(const PassCost& pass, const StepConfig& c, const Cluster& cluster, int tp_channel_sms,
                double window = 0.0) {
  PassCost p = pass;
  const bool userbuffers = c.overlap.tp_comm && is_sequence_parallel(c.spec.layout.mode);
  if (userbuffers) window += p.gemm_seconds;
  if (window <= 0.0 || p.comm_seconds <= 0.0) return p;
  const double hidden = std::min(p.comm_seconds, window);
  const double held = userbuffers ? sm_held_seconds(hidden * p.comm_on_sms_seconds / p.comm_seconds, kUserbufferSms,
                                                    cluster.sm_count)
                                  : sm_held_seconds(hidden, tp_channel_sms, cluster.sm_count);
  p.comm_seconds = p.comm_seconds - hidden + held;
  return p;
}

// Whether a block's weight pass runs right after its input-gradient pass, so that the backward TP
// collectives can run under the weight-gradient GEMMs (OverlapAssumptions::tp_backward).
bool weight_pass_with_backward(const StepConfig& c) {
  switch (c.spec.layout.schedule) {
    case ScheduleKind::gpipe:
    case ScheduleKind::one_f_one_b:
    case ScheduleKind::interleaved: return true;
    default: return c.spec.layout.pp == 1;  // without a pipeline every schedule runs B then W
  }
}

// Whether stage r's work is computed, standing for others: with --pp-layers every stage is its
// own; with an even split the inner stages are alike, so the first, the last and stage 1 do.
bool stands_for_stages(const StepConfig& c, int r) {
  return !c.spec.layout.pp_layers.empty() || r == 0 || r == c.spec.layout.pp - 1 || r == 1;
}

// One micro-batch's work on stage r: its blocks (with what recomputation adds before backward),
// the embedding on the first stage, the head on the last.
StageWork stage_work(const StepConfig& c, const LayerCosts& costs, int stage, const Cluster& cluster,
                     int tp_channel_sms) {
  // Under DualPipe each chunk runs half the micro-batches: per micro-batch, half of both.
  const double share = c.chunk_share();
  const double L = static_cast<double>(c.stage_blocks(stage)) * share;
  auto run = [&](const PassCost& pass, double window = 0.0) { return as_run(pass, c, cluster, tp_channel_sms, window); };
  StageWork w;
  w.forward = run(costs.block.forward).scaled(L);
  w.backward_input = run(costs.block.recompute(c.effective_recompute())).scaled(L);
  const bool one_d = is_megatron_1d(c.spec.layout.mode);
  const bool async_backward = one_d && c.overlap.tp_backward && weight_pass_with_backward(c);
  w.backward_input += run(costs.block.backward_input, async_backward ? costs.block.backward_weight.gemm_seconds : 0.0).scaled(L);
  w.backward_weight = run(costs.block.backward_weight).scaled(L);
  for (const UnitCosts* unit : {c.holds_embedding(stage) ? &costs.embedding : nullptr, c.holds_head(stage) ? &costs.head : nullptr}) {
    if (unit == nullptr) continue;
    w.forward += run(unit->forward).scaled(share);
    w.backward_input += run(unit->backward_input).scaled(share);
    w.backward_weight += run(unit->backward_weight).scaled(share);
  }
  // mdtp's engine runs its own three cross-entropy kernels (engine_kernels.hpp), not Megatron's.
  if (!c.cross_entropy_fusion && !c.engine_kernels && c.holds_head(stage)) {
    // Megatron's cross-entropy as fp32 PyTorch operations (StepConfig): beyond the fused kernel's
    // traffic, 32 − δ bytes per logit in five more kernels forward, 8 in one more backward.
    const double logits = costs.head_logits * share;
    const double forward = (32.0 - static_cast<double>(dtype_size(c.dtype()))) * logits, backward = 8.0 * logits;
    w.forward.stream_bytes += forward;
    w.forward.stream_seconds += stream_seconds(forward, cluster, 5);
    w.backward_input.stream_bytes += backward;
    w.backward_input.stream_seconds += stream_seconds(backward, cluster, 1);
  }
  double params = costs.block_params * L;
  if (c.holds_embedding(stage)) params += costs.embedding_params * share;
  if (c.holds_head(stage)) params += costs.head_params * share;
  const double delta = static_cast<double>(dtype_size(c.dtype())), g = static_cast<double>(dtype_size(c.grad_dtype()));
  if (c.gradient_accumulation_fusion) {
    // The weight-gradient GEMMs add into the buffer in their epilogues (StepConfig), which read and
    // write it in the gradients' dtype where layer_costs priced a write of dW: 2g − δ more bytes per
    // element, as the epilogue runs after each wave's main loop (kernel_time.hpp).
    const double bytes = params * (2.0 * g - delta);
    w.backward_weight.stream_bytes += bytes;
    w.backward_weight.stream_seconds += stream_seconds(bytes, cluster, 0);
  } else {
    // The separate accumulation kernels (StepConfig): dW read, the buffer read and written.
    const double bytes = params * (delta + 2.0 * g);
    const int kernels = static_cast<int>(std::lround(costs.block_param_tensors * L)) + 2;
    w.backward_weight.stream_bytes += bytes;
    w.backward_weight.stream_seconds += stream_seconds(bytes, cluster, kernels);
  }
  return w;
}

// The optimizer step as mdtp's engine runs it (StepConfig::engine_kernels): the gradients zeroed,
// their squares summed for the norm and AdamW — one kernel per parameter tensor for each without
// ZeRO (tp/parameter.cpp), and under ZeRO one fill per flat bucket (stage 1 zeroes the full
// buckets), one sum of squares per parameter segment of the shard, one AdamW per bucket
// (zero/shard_optimizer.cpp).  Buckets: the stage's gradients in buckets of the spec's cap; the
// tensors of a stage: its blocks' plus four (the embedding's tables, the final norm, a head).
double engine_optimizer_seconds(const StepConfig& c, const LayerCosts& costs, double stage_params,
                                const Cluster& cluster) {
  const double g = static_cast<double>(dtype_size(c.grad_dtype())), delta = static_cast<double>(dtype_size(c.dtype()));
  const double K = c.optimizer_bytes_per_param();
  const int dp = c.spec.layout.dp, stage = c.spec.zero.stage;
  const int tensors = static_cast<int>(std::lround(costs.block_param_tensors * static_cast<double>(c.layers_per_stage()))) + 4;
  const double shard = stage_params / (stage >= 1 ? dp : 1);
  const double adamw = shard * (g + 2 * K + 2 * delta);  // grad read; moments and value read and written
  if (stage == 0)
    return stream_seconds(stage_params * g, cluster, tensors) + stream_seconds(stage_params * g, cluster, tensors) +
           stream_seconds(adamw, cluster, tensors);
  const int buckets = std::max(1, static_cast<int>(std::ceil(stage_params * g / (c.spec.zero.bucket_mb * 1048576.0))));
  const int segments = (tensors + dp - 1) / dp + buckets - 1;
  const double fill = stage == 1 ? stage_params * g : 0.0;
  return (stage == 1 ? stream_seconds(fill, cluster, buckets) : 0.0) + stream_seconds(shard * g, cluster, segments) +
         stream_seconds(adamw, cluster, buckets);
}

// What Megatron's DDP does to its contiguous gradient buffer once per step besides reducing it, on
// the compute stream, where the step holds one (StepConfig::megatron_gradient_buffer):
// zero_grad_buffer() writes it whole before the first micro-batch (g bytes per parameter), and before each bucket's reduction, with dp > 1, it is
// scaled by 1/dp (gradient_scaling_factor: Megatron averages before the collective unless
// --ddp-average-in-collective; g read and written) and, with grad_nan_check, its norm is taken
// (g read).  One kernel each per bucket — Megatron's default bucket holds max(4·10⁷, 10⁶·dp)
// elements when the reduction overlaps, the whole buffer otherwise — and one zero_() per step.
double gradient_buffer_seconds(const StepConfig& c, double stage_params, const Cluster& cluster) {
  if (!c.megatron_gradient_buffer()) return 0.0;
  const double buffer = stage_params * static_cast<double>(dtype_size(c.grad_dtype()));
  const double bucket_elements = std::max(4e7, 1e6 * c.spec.layout.dp);
  const int buckets =
      c.overlap.dp_gradients ? std::max(1, static_cast<int>(std::ceil(stage_params / bucket_elements))) : 1;
  const int per_bucket = (c.spec.layout.dp > 1 ? 1 : 0) + (c.grad_nan_check ? 1 : 0);
  const double read_written = ((c.spec.layout.dp > 1 ? 2.0 : 0.0) + (c.grad_nan_check ? 1.0 : 0.0)) * buffer;
  return stream_seconds(buffer, cluster, 1) +
         (per_bucket > 0 ? stream_seconds(read_written, cluster, per_bucket * buckets) : 0.0);
}

// The two-rank groups along the pipeline (the tied embedding's first and last stage, DualPipe's
// mirror stages): where the pipeline crosses nodes, one GPU on each of two nodes.
GroupSpan stage_pair(const GroupSpan& pp) { return {.link = pp.link, .ranks_per_node = 1, .nics = 1}; }

// How long unit `unit`'s pass in `direction` runs on a rank — its kernels and TP collectives; a
// block's backward with what recomputation adds and its weight gradients — the time a prefetch
// started with it has to hide under (ZeRO-3, below).
double unit_pass_seconds(const StepConfig& c, const LayerCosts& costs, int unit, int direction, const Cluster& cluster,
                         int tp_channel_sms) {
  const int head = static_cast<int>(c.spec.model.layers) + 1;
  const bool block = unit != 0 && unit != head;
  const UnitCosts& u = unit == 0 ? costs.embedding : unit == head ? costs.head : costs.block;
  auto run = [&](const PassCost& pass) { return as_run(pass, c, cluster, tp_channel_sms).seconds(); };
  if (direction > 0) return run(u.forward);
  double t = run(u.backward_input) + run(u.backward_weight);
  if (block) t += run(costs.block.recompute(c.effective_recompute()));
  return t;
}

double seconds(CollectiveOp op, int n, double bytes, DType dtype, const GroupSpan& span, const TimeModel& model) {
  const auto elements = static_cast<std::int64_t>(std::ceil(bytes / static_cast<double>(dtype_size(dtype))));
  return predict_on_link(op, n, elements, dtype, span, model).seconds;
}

// The step model of a configuration already validated (every public estimate_step validates once;
// defined below the public entry points).
StepEstimate estimate_validated_step(const StepConfig& c, const LayerCosts& costs, const Placement& placement,
                                     const Cluster& cluster, const Zero3Timeline& zero3_gathers);

}  // namespace

Zero3Timeline zero3_gather_timeline(const StepConfig& c, const Placement& placement, const Cluster& cluster) {
  Zero3Timeline t;
  if (c.spec.zero.stage != 3 || c.spec.layout.dp <= 1) return t;
  const TimeModel model = cluster_time_model(cluster);
  for (int r = 0; r < c.spec.layout.pp; ++r)
    if (stands_for_stages(c, r)) t.stages.push_back(r);
  // The gathers a pass starts run one after another, as NCCL runs the collectives of one
  // communicator in its stream (each pays its own ring's latency).  Buckets repeat pass after
  // pass: each distinct call priced once.
  std::map<std::tuple<std::int64_t, DType, int>, double> priced;
  auto seconds_of = [&](const std::vector<GatherCall>& calls) {
    double total = 0.0;
    for (const GatherCall& call : calls) {
      const auto key = std::tuple{call.elements, call.dtype, call.group_size};
      auto it = priced.find(key);
      if (it == priced.end())
        it = priced
                 .emplace(key, predict_on_link(CollectiveOp::all_gather, call.group_size, call.elements, call.dtype,
                                               placement.dp, model)
                                   .seconds)
                 .first;
      total += static_cast<double>(call.count) * it->second;
    }
    return total;
  };
  for (const std::vector<PassGathers>& stage : zero3_gather_passes(StepCommConfig{.spec = c.spec}, t.stages)) {
    std::vector<Zero3Pass>& passes = t.passes.emplace_back();
    passes.reserve(stage.size());
    for (const PassGathers& p : stage)
      passes.push_back({p.unit, p.direction, p.action, seconds_of(p.waited), seconds_of(p.ahead)});
  }
  return t;
}

double zero3_gather_seconds(const StepConfig& c, const Placement& placement, const Cluster& cluster) {
  double busiest = 0.0;
  for (const std::vector<Zero3Pass>& passes : zero3_gather_timeline(c, placement, cluster).passes) {
    double total = 0.0;
    for (const Zero3Pass& p : passes) total += p.waited + p.ahead;
    busiest = std::max(busiest, total);
  }
  return busiest;
}

namespace {

// A validated configuration on its placement, ZeRO-3's gathers priced here.
StepEstimate estimate_placed_step(const StepConfig& c, const LayerCosts& costs, const Placement& placement,
                                  const Cluster& cluster) {
  return estimate_validated_step(c, costs, placement, cluster, zero3_gather_timeline(c, placement, cluster));
}

}  // namespace

StepEstimate estimate_step(const StepConfig& c, const LayerCosts& costs, const Placement& placement,
                           const Cluster& cluster) {
  validate(c);
  return estimate_placed_step(c, costs, placement, cluster);
}

StepEstimate estimate_step(const StepConfig& c, const LayerCosts& costs, const Placement& placement,
                           const Cluster& cluster, const Zero3Timeline& zero3_gathers) {
  validate(c);
  return estimate_validated_step(c, costs, placement, cluster, zero3_gathers);
}

StepEstimate estimate_step(const StepConfig& c, const LayerCosts& costs, const Cluster& cluster) {
  validate(c);
  return estimate_placed_step(c, costs, place(c, cluster), cluster);
}

namespace {

// The stages the step is priced on, each standing for some of the pipeline's: every stage with
// --pp-layers; with an even split the first, the last and one inner stage for the pp − 2 alike.
struct PricedStages {
  std::vector<StageWork> work;
  std::vector<double> weight;  // how many stages each entry stands for
  StageTimes mean;             // the pipeline's mean passes (fill and drain), before ZeRO-3's waits
};

PricedStages priced_stages(const StepConfig& c, const LayerCosts& costs, const Cluster& cluster,
                           int tp_channel_sms) {
  const int pp = c.spec.layout.pp;
  const bool even = c.spec.layout.pp_layers.empty();
  PricedStages s;
  for (int r = 0; r < pp; ++r)
    if (stands_for_stages(c, r)) {
      s.work.push_back(stage_work(c, costs, r, cluster, tp_channel_sms));
      s.weight.push_back(even && r == 1 && pp > 2 ? pp - 2 : 1);
    }
  auto mean_of = [&](auto pick) {
    double sum = 0.0;
    for (std::size_t i = 0; i < s.work.size(); ++i) sum += s.weight[i] * pick(s.work[i]);
    return sum / pp;
  };
  s.mean.forward = mean_of([](const StageWork& w) { return w.forward.seconds(); });
  s.mean.backward_input = mean_of([](const StageWork& w) { return w.backward_input.seconds(); });
  s.mean.backward_weight = mean_of([](const StageWork& w) { return w.backward_weight.seconds(); });
  return s;
}

// ZeRO-3 (zero3_gather_timeline): each unit pass waits for the gathers it starts itself (nothing
// prefetched them: the step's first) and for what the prefetch its predecessor started has left
// when the predecessor ends.  A prefetch hides under one pass only — so a forward pass shorter
// than its next unit's gather waits however long the backward passes are — and, started in the
// last pass of a schedule action, also under the time the stage then waits for the next action's
// input (the pipeline's idle time, from a simulation of the schedule with the mean passes:
// plan/schedule_sim.hpp).  Per micro-batch and priced stage (forward, backward_input): it
// lengthens that stage's passes, so it counts in the steady state and in the fill and drain alike.
std::vector<StageTimes> zero3_gather_waits(const StepConfig& c, const LayerCosts& costs, const PricedStages& stages,
                                           const Zero3Timeline& zero3_gathers, const Cluster& cluster,
                                           int tp_channel_sms) {
  std::vector<StageTimes> gather_wait(stages.work.size());
  if (zero3_gathers.passes.empty()) return gather_wait;
  require(zero3_gathers.passes.size() == stages.work.size(), "the ZeRO-3 gather timeline has ",
          zero3_gathers.passes.size(), " stages; the configuration stands for ", stages.work.size());
  const int pp = c.spec.layout.pp;
  const std::int64_t m = c.microbatches();
  // Simulated only when a prefetch outlasts the pass it started in (the planner prices many
  // configurations whose gathers all hide).
  std::optional<Schedule> schedule;
  std::optional<Simulation> timeline;
  // The time stage r waits between the end of action j and the start of its next action that
  // runs unit passes (a weight pass between them included).
  auto idle_after = [&](int r, int j) {
    if (pp == 1) return 0.0;
    if (!timeline) {
      const ParallelLayout& l = c.spec.layout;
      schedule = make_schedule(l.schedule, pp, static_cast<int>(m), l.chunks, l.group_size);
      timeline = simulate(*schedule, chunk_pass_times(*schedule, stages.mean));
    }
    const auto& actions = schedule->actions[static_cast<std::size_t>(r)];
    const auto& times = timeline->times[static_cast<std::size_t>(r)];
    for (std::size_t next = static_cast<std::size_t>(j) + 1; next < actions.size(); ++next)
      if (actions[next].op != PassKind::W)
        return std::max(0.0, times[next].start - times[static_cast<std::size_t>(j)].end);
    return 0.0;
  };
  const double per_micro_batch = 1.0 / static_cast<double>(m);
  for (std::size_t k = 0; k < stages.work.size(); ++k) {
    const int r = zero3_gathers.stages[k];
    const std::vector<Zero3Pass>& passes = zero3_gathers.passes[k];
    for (std::size_t i = 0; i < passes.size(); ++i) {
      double wait = passes[i].waited;
      if (i > 0) {
        const Zero3Pass& before = passes[i - 1];
        double window = unit_pass_seconds(c, costs, before.unit, before.direction, cluster, tp_channel_sms);
        if (before.ahead > window && before.action != passes[i].action) window += idle_after(r, before.action);
        wait += std::max(0.0, before.ahead - window);
      }
      (passes[i].direction > 0 ? gather_wait[k].forward : gather_wait[k].backward_input) += wait * per_micro_batch;
    }
  }
  return gather_wait;
}

// Per micro-batch, every chunk boundary's pipeline sends: the residual shard forward and its
// gradient backward (with Megatron's scatter/gather, 1/t of it sent and all-gathered on arrival);
// and the bytes of the step.
struct PipelineSends {
  double hop = 0.0;      // one boundary crossed: the send (and the all-gather on arrival)
  double seconds = 0.0;  // per micro-batch, before any overlap
  double bytes = 0.0;    // per step
};

PipelineSends pipeline_sends(const StepConfig& c, const LayerCosts& costs, const Placement& placement,
                             const TimeModel& model) {
  PipelineSends sends;
  if (c.spec.layout.pp == 1) return sends;
  const double delta = static_cast<double>(dtype_size(c.dtype()));
  const bool scatter_gather = c.pipeline_sends_scattered();
  const double bytes = costs.boundary_elements * delta / (scatter_gather ? c.spec.layout.tp : 1);
  sends.hop = seconds(CollectiveOp::send, 2, bytes, c.dtype(), placement.pp, model);
  if (scatter_gather)
    sends.hop += seconds(CollectiveOp::all_gather, c.spec.layout.tp, costs.boundary_elements * delta, c.dtype(),
                         placement.tp, model);
  // Chunk passes per micro-batch and stage: v, but 1 under DualPipe (each route half the batch).
  const double chunk_passes = c.spec.layout.chunks * c.chunk_share();
  sends.seconds = 2.0 * chunk_passes * sends.hop;
  // Per micro-batch and chunk: the shard sent and received forward, its gradient backward.
  sends.bytes = static_cast<double>(c.microbatches()) * chunk_passes * 4.0 * bytes;
  return sends;
}

// The data-parallel side of the step, exposed time and bytes: ZeRO-3's gathers before forward and
// backward of every micro-batch, or once per step when kept (each call's buffer the full stage, as
// the ledger counts an all-gather; their waits from zero3_gather_waits), the gradient reduction
// once per step under the last micro-batch's backward (chunk by chunk under the interleaved
// schedule: chunked_overlap.hpp), or with zero_reduce_per_micro_batch under each micro-batch's, and
// ZeRO-1/2's updated parameters all-gathered (under the first forward).  What runs beside
// compute costs it, as well, the SMs its NCCL channels hold meanwhile (collective_sms.hpp).
struct DataParallelCost {
  double exposed = 0.0;
  double bytes = 0.0;
};

DataParallelCost data_parallel_cost(const StepConfig& c, const StageWork& slowest, double zero3_waits,
                                    double stage_params, const Placement& placement, const TimeModel& model,
                                    const OffloadCost& offload, int sm_count) {
  const double delta = static_cast<double>(dtype_size(c.dtype()));
  const double g = static_cast<double>(dtype_size(c.grad_dtype()));
  const double mb = static_cast<double>(c.microbatches());
  const int dp = c.spec.layout.dp, zero = c.spec.zero.stage;
  DataParallelCost d;
  d.exposed = mb * zero3_waits;
  const double backward = slowest.backward_input.seconds() + slowest.backward_weight.seconds();
  // The compute lost to the channels of a collective for the `hidden` seconds it runs beside it.
  const int channel_sms = nccl_channel_sms(placement.dp, model);
  auto held = [&](double hidden) { return sm_held_seconds(hidden, channel_sms, sm_count); };
  // Chunk by chunk under Megatron's interleaved schedule (chunked_exposure); else one chunk.
  const bool interleaved = c.spec.layout.schedule == ScheduleKind::interleaved && c.spec.layout.chunks > 1;
  const int chunks = interleaved ? c.spec.layout.chunks : 1;
  const int group = static_cast<int>(
      std::min<std::int64_t>(c.spec.layout.group_size > 0 ? c.spec.layout.group_size : c.spec.layout.pp, c.microbatches()));
  // What one micro-batch's reduction leaves beyond its backward, with ZeRO-Offload's copies of the
  // shard on the reduction's stream after it (offload_cost.hpp): each micro-batch's accumulation
  // through the host, the last one's gradients to the host as well.
  auto per_micro_batch_exposed = [&](double reduction, double floor) {
    const double all_but_last = std::max(floor, reduction + offload.accumulation - backward);
    const double last = std::max(floor, reduction + offload.accumulation + offload.gradients_out - backward);
    return mb * all_but_last + (last - all_but_last);  // exactly m × the first without offload
  };
  // ZeRO-3 gathering per pass and reducing per micro-batch: each reduce-scatter under its
  // micro-batch's backward, beside the gathers.
  const bool reduction_in_zero3 =
      zero == 3 && c.spec.zero.reduce_per_micro_batch && !c.spec.zero.keep_parameters && dp > 1;
  if (zero == 3 && dp > 1) {
    d.bytes += (c.spec.zero.keep_parameters ? 1.0 : 2.0 * mb) * stage_params * delta;
    if (reduction_in_zero3) {
      const double scatter = seconds(CollectiveOp::reduce_scatter, dp, stage_params * g, c.grad_dtype(), placement.dp,
                                     model);
      d.exposed += per_micro_batch_exposed(scatter, 0.0) + mb * held(std::min(scatter, backward));
    }
  }
  // ZeRO-Offload copies the shard to the host on the reduction's stream even at dp 1, where
  // nothing is reduced.
  if ((dp > 1 || c.spec.zero.offload) && !reduction_in_zero3) {
    const double grad_bytes = stage_params * g;
    const CollectiveOp reduce = zero == 0 ? CollectiveOp::all_reduce : CollectiveOp::reduce_scatter;
    const double reduction = dp > 1 ? seconds(reduce, dp, grad_bytes, c.grad_dtype(), placement.dp, model) : 0.0;
    if (c.overlap.dp_gradients) {
      const double last_bucket =
          dp > 1 ? seconds(reduce, dp, std::min(grad_bytes, c.overlap.bucket_bytes), c.grad_dtype(), placement.dp,
                           model)
                 : 0.0;
      if (c.spec.zero.reduce_per_micro_batch) {
        d.exposed += per_micro_batch_exposed(reduction, last_bucket) + mb * held(std::min(reduction, backward));
      } else {
        // Once per step, under the last micro-batch's backward; with ZeRO-Offload, whose copies to the
        // host follow on the reduction's stream, as one chunk.
        const double left = std::max(last_bucket, chunked_exposure(reduction + offload.gradients_out, backward,
                                                                     c.spec.zero.offload ? 1 : chunks, group));
        d.exposed += left + held(reduction - std::clamp(left, 0.0, reduction));
      }
    } else {
      // After the backward: the reductions and the offload's copies wait in full.
      d.exposed += (c.spec.zero.reduce_per_micro_batch ? mb : 1.0) * (reduction + offload.accumulation) +
                   offload.gradients_out;
    }
    if (dp > 1 && (zero == 1 || zero == 2)) {
      const double gather = seconds(CollectiveOp::all_gather, dp, stage_params * delta, c.dtype(), placement.dp, model);
      // --overlap-param-gather: under the next step's first forward, a bucket ahead of its first use
      // (chunked_overlap.hpp: not chunk by chunk).
      const double forward = slowest.forward.seconds();
      d.exposed += c.overlap.param_gather ? std::max(0.0, gather - forward) + held(std::min(gather, forward)) : gather;
    }
  }
  if (dp > 1) {
    // The gradient reduction, once per step or per micro-batch, and ZeRO-1/2's updated parameters.
    const bool per_micro_batch = zero >= 2 && c.spec.zero.reduce_per_micro_batch;
    d.bytes += (per_micro_batch ? mb : 1.0) * stage_params * g;
    if (zero == 1 || zero == 2) d.bytes += stage_params * delta;
  }
  return d;
}

// The optimizer step: the update over the rank's shard (2g + 2K + δ bytes per parameter: the
// gradient read for the norm and the update, the state read and written, the value written) and
// Megatron's gradient-buffer passes; or the engine's own kernels; or, under ZeRO-Offload, the host's
// update and the copy of the new values back (offload_cost.hpp).
double optimizer_seconds(const StepConfig& c, const LayerCosts& costs, double stage_params, const Cluster& cluster,
                         const OffloadCost& offload) {
  if (c.engine_kernels) return engine_optimizer_seconds(c, costs, stage_params, cluster);
  if (c.spec.zero.offload) return offload.after_backward();  // DeepSpeed's: no Megatron buffer
  const double delta = static_cast<double>(dtype_size(c.dtype()));
  const double g = static_cast<double>(dtype_size(c.grad_dtype()));
  const double K = c.optimizer_bytes_per_param();
  const double shard = stage_params / (c.spec.zero.stage >= 1 ? c.spec.layout.dp : 1);
  return stream_seconds(shard * (2 * g + 2 * K + delta), cluster) + gradient_buffer_seconds(c, stage_params, cluster);
}

// What follows from the step time: tokens/s, TFLOP/s per GPU (recomputation counted), MFU and HFU.
void set_rates(StepEstimate& e, const StepConfig& c, const Cluster& cluster) {
  e.bubble_fraction = e.time.bubble / e.step_seconds;
  const double tokens = static_cast<double>(c.spec.global_batch) * static_cast<double>(c.spec.model.seq);
  e.tokens_per_second = tokens / e.step_seconds;
  e.model_flops = model_flops(c.spec.model, c.spec.global_batch);
  e.hardware_flops = hardware_flops(c.spec.model, c.spec.global_batch, c.effective_recompute());
  const double gpus = c.gpus(), peak = cluster.peak(c.dtype());
  e.tflops_per_gpu = e.hardware_flops / e.step_seconds / gpus / 1e12;
  e.mfu = e.model_flops / e.step_seconds / gpus / peak;
  // HFU counts what MFU counts plus the recomputed FLOPs (PaLM's definition), so HFU ≥ MFU.
  const double recomputed = e.hardware_flops - hardware_flops(c.spec.model, c.spec.global_batch, Recompute::none);
  e.hfu = (e.model_flops + recomputed) / e.step_seconds / gpus / peak;
}

StepEstimate estimate_validated_step(const StepConfig& c, const LayerCosts& costs, const Placement& placement,
                                     const Cluster& cluster, const Zero3Timeline& zero3_gathers) {
  const TimeModel model = cluster_time_model(cluster);
  StepEstimate e;
  e.config = c;
  e.placement = placement;
  const std::int64_t m = c.microbatches();
  e.microbatches = m;
  const double mb = static_cast<double>(m);
  const double g = static_cast<double>(dtype_size(c.grad_dtype()));
  const int pp = c.spec.layout.pp;

  // Every priced stage's micro-batch with ZeRO-3's waits: the slowest sets the steady state, the
  // mean the fill and drain.
  const int tp_channel_sms = nccl_channel_sms(placement.tp, model);
  const PricedStages stages = priced_stages(c, costs, cluster, tp_channel_sms);
  const std::vector<StageTimes> gather_wait = zero3_gather_waits(c, costs, stages, zero3_gathers, cluster, tp_channel_sms);
  auto waits = [](const StageTimes& t) { return t.forward + t.backward_input; };
  std::size_t slowest_index = 0;
  for (std::size_t k = 1; k < stages.work.size(); ++k)
    if (stages.work[k].seconds() + waits(gather_wait[k]) >
        stages.work[slowest_index].seconds() + waits(gather_wait[slowest_index]))
      slowest_index = k;
  const StageWork& slowest = stages.work[slowest_index];
  StageTimes mean = stages.mean;
  for (std::size_t i = 0; i < stages.work.size(); ++i) {
    mean.forward += stages.weight[i] * gather_wait[i].forward / pp;
    mean.backward_input += stages.weight[i] * gather_wait[i].backward_input / pp;
  }

  const PipelineSends sends = pipeline_sends(c, costs, placement, model);
  e.traffic.pp_bytes = sends.bytes;
  const double p2p_exposed = c.overlap.pp_p2p ? 0.0 : sends.seconds;

  // The pipeline's fill and drain.
  const PipelineConfig pipeline = c.pipeline();
  StageTimes fill = mean;
  fill.forward += p2p_exposed / 2;
  fill.backward_input += p2p_exposed / 2;
  // The input gradient sent before the weight pass (OverlapAssumptions): where W runs right after
  // B (GPipe, 1F1B, interleaved), the drain waits for each stage's backward-input pass only.  ZB-H1
  // and the simulated schedules place W themselves.
  if (c.overlap.input_gradient_first && weight_pass_with_backward(c)) fill.backward_weight = 0.0;
  // Overlapped sends block no stage, but each pass still waits for its input to arrive: the
  // schedule's dependency chain carries every send (pipeline_bubble.hpp).
  e.time.bubble = pp > 1 ? bubble_seconds(pipeline, fill, c.overlap.pp_p2p ? sends.hop : 0.0) : 0.0;

  // The slowest stage's kernels of one step, by class; compute is their sum (ComputeSplit).
  const PassCost per_step = slowest.total().scaled(mb);
  e.compute = {per_step.gemm_seconds, per_step.gemm_flops, per_step.stream_seconds, per_step.stream_bytes};
  e.time.compute = per_step.compute_seconds();
  const double L = static_cast<double>(c.layers_per_stage());
  e.time.tp_comm = mb * slowest.comm() + L * costs.block_grad_sync_seconds;
  e.traffic.tp_bytes =
      mb * (slowest.forward.comm_bytes + slowest.backward_input.comm_bytes + slowest.backward_weight.comm_bytes);

  // Along the pipeline: the sends, the tied wte copies' all-reduce over the first and last stage,
  // DualPipe's mirror stages' gradient sums (shards under ZeRO).
  double stage_params = 0.0;  // the largest stage's (first or last with an even split; any with --pp-layers)
  for (int r = 0; r < pp; ++r) stage_params = std::max(stage_params, stage_parameters(c, costs, r));
  e.time.pp_comm = mb * p2p_exposed;
  if (c.head_holds_wte_copy()) {
    e.time.pp_comm += seconds(CollectiveOp::all_reduce, 2, costs.wte_params * g, c.grad_dtype(),
                              stage_pair(placement.pp), model);
    e.traffic.pp_bytes += costs.wte_params * g;
  }
  if (c.parameter_copies() == 2) {
    const double mirrored = stage_params * g / (c.spec.zero.stage >= 1 ? c.spec.layout.dp : 1);
    e.time.pp_comm += seconds(CollectiveOp::all_reduce, 2, mirrored, c.grad_dtype(), stage_pair(placement.pp), model);
    e.traffic.pp_bytes += mirrored;
  }

  const OffloadCost offload =
      c.spec.zero.offload ? offload_cost(c, stage_params / c.spec.layout.dp, cluster) : OffloadCost{};
  const DataParallelCost dp = data_parallel_cost(c, slowest, waits(gather_wait[slowest_index]), stage_params,
                                                 placement, model, offload, cluster.sm_count);
  e.time.dp_comm = dp.exposed;
  e.traffic.dp_bytes = dp.bytes;
  e.traffic.pcie_bytes = offload.pcie_bytes;
  e.time.optimizer = optimizer_seconds(c, costs, stage_params, cluster, offload);

  e.step_seconds = e.time.total();
  set_rates(e, c, cluster);
  e.memory = step_memory(c, costs, cluster);
  e.memory_capacity = cluster.hbm_bytes;
  e.fits = e.memory.total() <= cluster.hbm_bytes;
  if (c.spec.zero.offload) {  // the node's GPUs offload to one host memory
    e.host_memory_capacity = cluster.host->memory_bytes;
    e.fits = e.fits && e.memory.host * gpus_per_host(c, cluster) <= e.host_memory_capacity;
  }
  return e;
}

}  // namespace

StepEstimate estimate_step(const StepConfig& c, const Cluster& cluster_file) {
  validate(c);
  const Cluster cluster = for_job(cluster_file, c.gpus());
  return estimate_placed_step(c, layer_costs(c, cluster), place(c, cluster), cluster);
}

}  // namespace mdtp::cost
