// plan_step_comm: the calls of one GPT training step on a rank of one pipeline stage, written from
// the algorithms of src/model (embedding.hpp, lm_head.hpp, block and attention through plan_step),
// src/pipeline (boundary.hpp, executor.hpp), src/tp/parameter.hpp (reduce_gradients,
// global_grad_norm), src/zero (gradient_reducer, shard_optimizer, parameter_gatherer) and the
// trainer's loss — each a pure function of the configuration and the plans of src/plan.
#include "cost/gpt_step_comm.hpp"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "core/error.hpp"
#include "cost/geometry.hpp"
#include "cost/parameter_names.hpp"
#include "plan/unit_passes.hpp"
#include "spec/names.hpp"

namespace mdtp::cost {

namespace {

// How the GPT pieces that are not Linears are split (model/model_split.hpp): the groups spanning
// the residual's rows R, its column split C and the vocabulary split S ("" for none), and the
// group over which the residual stream is replicated (what the pipeline boundary slices).
struct SplitGroups {
  std::string rows, cols, vocab, replicated;
};

SplitGroups split_groups(TpMode mode) {
  switch (mode) {
    case TpMode::none: return {"", "", "", ""};
    case TpMode::d1: return {"", "", group::tp, group::tp};
    case TpMode::d1_sp: return {group::tp, "", group::tp, ""};
    case TpMode::d2: return {"tp.col", "tp.row", "tp.col", ""};
    case TpMode::d2p5: return {"tp.col-dep", "tp.row", "tp.col-dep", ""};
    case TpMode::d3: return {"tp.input-weight", "tp.output", "tp.input-weight", ""};
  }
  return {};
}

// Everything the plan reads off the configuration once.
class StepShapes {
 public:
  explicit StepShapes(const StepCommConfig& c)
      : config_(c), topology_(checked(c)), split_(split_groups(c.spec.layout.mode)),
        names_(parameter_names(c.spec.model)), attention_(workload("attention")), mlp_(workload("mlp")),
        layernorm_(workload("layernorm")) {
    rows_ = c.micro_batch() * c.spec.model.seq;
    const Extent r = layernorm_.layernorms().front().x;
    residual_rows_ = r.rows;
    residual_cols_ = r.cols;
    const std::int64_t S = size(split_.vocab);
    vocab_local_ = (c.spec.model.vocab + S - 1) / S;
    hidden_local_ = c.spec.model.hidden / size(split_.cols);
    // Attention holds whole heads: the QKV columns split over g ranks, each with heads/g query and
    // kv/g key/value heads, or a copy of one K/V head that g/kv ranks hold (model/attention.cpp
    // refuses anything else).
    const std::int64_t g = head_split_ranks(c.spec.layout.mode, c.spec.layout.tp, c.spec.layout.depth);
    const std::int64_t kv = c.spec.model.kv();
    require(c.spec.model.heads % g == 0 && (kv % g == 0 || g % kv == 0), "attention splits its heads over ", g,
            " ranks in mode ", tp_mode_name(c.spec.layout.mode), ": heads=", c.spec.model.heads,
            " must be divisible by ", g, ", and kv_heads=", kv, " must divide or be divisible by it");
    kv_copy_elements_ = copied_kv_elements(attention_, c.spec.model.hidden / c.spec.model.heads);
    slices_ = size(split_.replicated);
    require(residual_rows_ % slices_ == 0, "pipeline boundary: the ", residual_rows_,
            " rows of a micro-batch's residual stream must divide over the ", slices_, " ranks of ",
            split_.replicated, " that send a slice each");
  }

  const StepCommConfig& config() const { return config_; }
  const Topology& topology() const { return topology_; }
  const SplitGroups& split() const { return split_; }
  const ParameterNames& names() const { return names_; }
  int size(const std::string& group) const {
    return group.empty() ? 1 : static_cast<int>(topology_.groups(group).front().size());
  }
  bool many(const std::string& group) const { return size(group) > 1; }
  int dp() const { return topology_.dp(); }
  DType dtype() const { return config_.spec.precision.params; }
  std::int64_t rows() const { return rows_; }  // b·T: a replica's micro-batch rows
  std::int64_t hidden_local() const { return hidden_local_; }  // H/|C|
  std::int64_t vocab_local() const { return vocab_local_; }    // padded V/|S|
  std::int64_t residual_elements() const { return residual_rows_ * residual_cols_; }
  std::int64_t wire_elements() const { return residual_rows_ / slices_ * residual_cols_; }
  int slices() const { return slices_; }
  // Elements of one attention weight's key/value columns that tp.kv sums (0: no copies).
  std::int64_t kv_copy_elements() const { return kv_copy_elements_; }
  const Geometry& attention() const { return attention_; }
  const Geometry& mlp() const { return mlp_; }
  const Geometry& layernorm() const { return layernorm_; }

 private:
  static MeshConfig checked(const StepCommConfig& c) {
    const ModelShape& m = c.spec.model;
    require(m.layers > 0 && m.hidden > 0 && m.heads > 0 && m.seq > 0 && m.vocab > 0,
            "the GPT needs layers, hidden, heads, seq and vocab > 0; got layers=", m.layers, " hidden=", m.hidden,
            " heads=", m.heads, " seq=", m.seq, " vocab=", m.vocab);
    const ParallelLayout& l = c.spec.layout;
    require(l.micro_batches >= 1, "a step has at least one micro-batch; got ", l.micro_batches);
    require(l.dp >= 1 && c.spec.global_batch > 0 && c.spec.global_batch % (std::int64_t{l.dp} * l.micro_batches) == 0,
            "the global batch ", c.spec.global_batch, " must be a positive multiple of dp x micro-batches = ", l.dp,
            " x ", l.micro_batches);
    const int zero = c.spec.zero.stage;
    require(zero >= 0 && zero <= 3, "the ZeRO stage must be 0, 1, 2 or 3; got ", zero);
    return c.mesh();
  }
  Workload workload(const char* layer) const {
    Workload w;
    w.mode = config_.spec.layout.mode;
    w.mesh = config_.mesh();
    w.layer = layer;
    w.rows = config_.micro_batch() * config_.spec.model.seq;
    w.hidden = config_.spec.model.hidden;
    w.ffn_hidden = config_.spec.model.ffn();
    w.block = block_widths(config_.spec.model, head_split_ranks(w.mesh.tp_mode, w.mesh.tp, w.mesh.tp_depth));
    w.dtype = config_.spec.precision.params;
    w.grad_dtype = config_.spec.precision.grad_reduce;
    w.options = config_.options;
    return w;
  }

  StepCommConfig config_;
  Topology topology_;
  SplitGroups split_;
  ParameterNames names_;
  Geometry attention_, mlp_, layernorm_;
  std::int64_t rows_ = 0, residual_rows_ = 0, residual_cols_ = 0, vocab_local_ = 0, hidden_local_ = 0;
  int slices_ = 1;
  std::int64_t kv_copy_elements_ = 0;
};

// Collects counted calls, skipping groups of one rank where the code skips them.
class CallList {
 public:
  CallList(const StepShapes& s, std::vector<CountedCall>& out) : s_(s), out_(out) {}
  void add(const char* part, const char* phase, const std::string& group, CollectiveOp op, std::int64_t elements,
           DType dtype, std::int64_t count) {
    push(part, PlannedCall{phase, group, op, s_.size(group), elements, dtype}, count);
  }
  // Only where the group has more than one rank.
  void add_if_many(const char* part, const char* phase, const std::string& group, CollectiveOp op,
                   std::int64_t elements, DType dtype, std::int64_t count) {
    if (s_.many(group)) add(part, phase, group, op, elements, dtype, count);
  }
  // The forward and backward calls of a layer plan (its grad-sync is the step's, not per pass).
  void add_layer(const char* part, const Geometry& layer, std::int64_t count) {
    for (const PlannedCall& c : plan_step(layer.workload()))
      if (c.phase != phase::grad_sync) push(part, c, count);
  }
  // A layer's forward calls once more, as the recomputation before backward issues them.
  void add_layer_recomputed(const char* part, const Geometry& layer, std::int64_t count) {
    for (PlannedCall c : plan_step(layer.workload()))
      if (c.phase == phase::forward) {
        c.phase = phase::recompute;
        push(part, c, count);
      }
  }

 private:
  // Identical calls of one part are one line with their counts added.
  void push(const char* part, const PlannedCall& call, std::int64_t count) {
    if (count <= 0) return;
    for (CountedCall& c : out_)
      if (c.part == part && c.call.phase == call.phase && c.call.group == call.group && c.call.op == call.op &&
          c.call.elements == call.elements && c.call.dtype == call.dtype) {
        c.count += count;
        return;
      }
    out_.push_back(CountedCall{part, call, count});
  }

  const StepShapes& s_;
  std::vector<CountedCall>& out_;
};

// The vocabulary-parallel embedding of one micro-batch (model/embedding.cpp): forward reduces the
// looked-up partial rows over the rows' span (or all-reduces them over S when rows are not split);
// its weight pass all-gathers dX over the rows' span.
void embedding_calls(const StepShapes& s, CallList& list, std::int64_t count) {
  const SplitGroups& g = s.split();
  const std::int64_t partial = s.rows() * s.hidden_local();
  if (!s.many(g.vocab)) return;
  if (s.many(g.rows)) {
    list.add("embedding", phase::forward, g.rows, CollectiveOp::reduce_scatter, partial, s.dtype(), count);
    list.add("embedding", phase::backward, g.rows, CollectiveOp::all_gather, partial, s.dtype(), count);
  } else {
    list.add("embedding", phase::forward, g.vocab, CollectiveOp::all_reduce, partial, s.dtype(), count);
  }
}

// ln_f, the tied head and the cross-entropy of one micro-batch (model/lm_head.cpp).
void head_calls(const StepShapes& s, CallList& list, std::int64_t count) {
  const SplitGroups& g = s.split();
  list.add_layer("head", s.layernorm(), count);
  const std::int64_t gathered = s.rows() * s.hidden_local(), logits = s.rows() * s.vocab_local();
  const std::int64_t logit_rows = s.rows() / s.size(g.cols);
  list.add_if_many("head", phase::forward, g.rows, CollectiveOp::all_gather, gathered, s.dtype(), count);
  list.add_if_many("head", phase::forward, g.cols, CollectiveOp::reduce_scatter, logits, s.dtype(), count);
  list.add_if_many("head", phase::forward, g.vocab, CollectiveOp::all_reduce, logit_rows, DType::f64, count);  // row max
  list.add_if_many("head", phase::forward, g.vocab, CollectiveOp::all_reduce, logit_rows * 2, DType::f64,
                   count);  // Σexp, target
  list.add_if_many("head", phase::backward, g.cols, CollectiveOp::all_gather, logits, s.dtype(), count);
  if (s.many(g.vocab)) {
    if (s.many(g.rows))
      list.add("head", phase::backward, g.rows, CollectiveOp::reduce_scatter, gathered, s.dtype(), count);
    else list.add("head", phase::backward, g.vocab, CollectiveOp::all_reduce, gathered, s.dtype(), count);
  }
}

// The parameters of one unit, in the model's order.
void add_param(std::vector<BucketInput>& out, const StepShapes& s, std::string name, std::int64_t numel,
               const std::vector<std::string>& partial, bool decays, int unit) {
  BucketInput in{std::move(name), numel, {}, decays, s.dtype(), unit, "", 0, s.config().spec.precision.grad_reduce};
  for (const std::string& g : partial)
    if (!g.empty() && s.many(g)) in.partial_groups.push_back(g);
  // DualPipe: the stage's copy of every parameter is summed with its mirror stage's
  // (GptModel::sum_copies_over).
  if (s.config().spec.layout.stage_mapping == StageMapping::mirrored && s.many(group::mirror))
    in.partial_groups.push_back(group::mirror);
  out.push_back(std::move(in));
}

// The vocabulary table [V (padded), H] sharded over S × C: the word embedding, the tied head's
// copy of it (both partial over `embedding`, the first and last stage), or an untied head's own
// weight (partial over nothing: only the head's stage holds it).
void add_vocabulary_table(std::vector<BucketInput>& out, const StepShapes& s, const std::string& name, bool tied,
                          int unit) {
  add_param(out, s, name, s.vocab_local() * s.hidden_local(),
            tied ? std::vector<std::string>{group::embedding} : std::vector<std::string>{}, true, unit);
}

// A norm's γ (and β where it has one); neither decays.
void add_norm(std::vector<BucketInput>& out, const StepShapes& s, const std::string& module, int unit) {
  const std::vector<ParamShard>& params = s.layernorm().layernorms().front().params;
  for (std::size_t k = 0; k < params.size(); ++k)
    add_param(out, s, module + (k == 0 ? ".weight" : ".bias"), params[k].elements, params[k].partial_grad_over,
              false, unit);
}

// Each Linear's weight (decays) and bias (where the block has biases; does not decay).
void add_linears(std::vector<BucketInput>& out, const StepShapes& s, const Geometry& layer,
                 const std::vector<std::string>& modules, int unit) {
  const auto& linears = layer.linears();
  for (std::size_t i = 0; i < linears.size(); ++i)
    for (std::size_t k = 0; k < linears[i].params.size(); ++k) {
      const ParamShard& p = linears[i].params[k];
      add_param(out, s, modules[i] + (k == 0 ? ".weight" : ".bias"), p.elements, p.partial_grad_over, k == 0, unit);
    }
}

// The transformer blocks (units 1..L) a stage holds.
std::int64_t held_blocks(const StagePartition& partition, int stage) {
  std::int64_t blocks = 0;
  for (const UnitSpan& r : partition.stage_units(stage))
    blocks += std::max(0, std::min(r.last, partition.n_layer()) - std::max(r.first, 1) + 1);
  return blocks;
}

std::vector<BucketInput> parameters_of(const StepShapes& s, const StagePartition& partition, int stage) {
  const int L = partition.n_layer(), head = L + 1;
  const std::vector<UnitSpan> spans = partition.stage_units(stage);
  auto holds = [&](int u) {
    return std::any_of(spans.begin(), spans.end(), [&](const UnitSpan& r) { return r.first <= u && u <= r.last; });
  };
  const ParameterNames& n = s.names();
  const bool tied = s.config().spec.model.tied_head;
  std::vector<BucketInput> out;
  if (holds(0)) {
    add_vocabulary_table(out, s, n.word_embedding, tied, 0);
    if (has_position_table(s.config().spec.model))
      add_param(out, s, n.position_embedding, s.config().spec.model.seq * s.hidden_local(), {s.split().rows}, true, 0);
  }
  for (int i = 0; i < L; ++i) {
    if (!holds(i + 1)) continue;
    const std::string prefix = n.block(i);
    add_norm(out, s, prefix + n.norm_1, i + 1);
    add_linears(out, s, s.attention(), {prefix + n.attention_in, prefix + n.attention_out}, i + 1);
    add_norm(out, s, prefix + n.norm_2, i + 1);
    add_linears(out, s, s.mlp(), {prefix + n.mlp_in, prefix + n.mlp_out}, i + 1);
  }
  if (holds(head)) {
    // GptModel's order: a tied head's copy of the embedding first (where the stage lacks the
    // embedding), the final norm, an untied head's own weight last (Hugging Face's order).
    if (tied && !holds(0)) add_vocabulary_table(out, s, n.word_embedding, true, head);
    add_norm(out, s, n.final_norm, head);
    if (!tied) add_vocabulary_table(out, s, n.lm_head, false, head);
  }
  // ZeRO 1–3 on a 2.5D mesh shard the weights partial over tp.dep over dp × depth
  // (zero/zero_layout.cpp, docs/zero.md §5).
  if (s.config().spec.zero.stage >= 1 && s.config().spec.layout.mode == TpMode::d2p5)
    fold_replica_group(out, "tp.dep", s.size("tp.dep"), kDpDepthGroup, s.dp());
  return out;
}

// The group a bucket is sharded over: the data-parallel group, or its own (2.5D weights).
std::string shard_group(const Bucket& b) { return b.shard_group.empty() ? group::dp : b.shard_group; }

BucketPlan bucket_plan_of(const StepShapes& s, const std::vector<BucketInput>& params) {
  BucketOptions options;
  options.dp = s.dp();
  options.cap_bytes = bucket_cap_bytes(s.config().spec.zero.bucket_mb);
  require(s.config().align_bytes > 0, "the ZeRO alignment must be positive; got align_bytes=", s.config().align_bytes);
  options.align_bytes = s.config().align_bytes;
  options.unit_aligned = s.config().spec.zero.stage == 3;
  return plan_buckets(params, options);
}

// One unit pass of the replay below: the buckets whose gathers it starts at its acquire (waited)
// and for the next pass (ahead).
struct PassStarts {
  int unit = 0, direction = +1;
  std::vector<std::size_t> waited, ahead;
};

// ZeRO-3's gathers, replayed: the engine's hooks around every unit pass of the stage's action list,
// in the order plan/unit_passes.hpp gives (zero/zero_engine.cpp, zero/parameter_gatherer.cpp).  Returns the all-gathers issued per bucket;
// with `passes`, also which pass started each.
std::vector<std::int64_t> stage3_gathers(const StepShapes& s, const StagePartition& partition, const Schedule& schedule,
                                         int stage, const std::vector<BucketInput>& params, const BucketPlan& plan,
                                         std::vector<PassStarts>* passes_out = nullptr) {
  const int units = partition.n_layer() + 2, head = units - 1;
  const std::vector<UnitSpan> spans = partition.stage_units(stage);
  // A tied head on the embedding's stage reads the embedding's own table (its bucket); an untied
  // head reads its own weight, which is in the head unit's buckets already.
  const bool tied = s.config().spec.model.tied_head && !spans.empty() && spans.front().first == 0 &&
                    spans.back().last == head;
  const std::string& wte = s.names().word_embedding;
  std::vector<std::vector<std::size_t>> forward(static_cast<std::size_t>(units));
  auto add_unique = [](std::vector<std::size_t>& list, std::size_t b) {
    if (std::find(list.begin(), list.end(), b) == list.end()) list.push_back(b);
  };
  for (std::size_t i = 0; i < params.size(); ++i) {
    add_unique(forward[static_cast<std::size_t>(params[i].unit)], plan.place[i].bucket);
    if (tied && params[i].unit == 0 && params[i].name == wte)
      add_unique(forward[static_cast<std::size_t>(head)], plan.place[i].bucket);
  }
  std::vector<std::vector<std::size_t>> backward = forward;
  backward[0].clear();  // the embedding's backward-input pass reads no weight
  auto reads = [&](int u, int direction) -> const std::vector<std::size_t>& {
    return (direction > 0 ? forward : backward)[static_cast<std::size_t>(u)];
  };

  const std::size_t n = plan.buckets.size();
  std::vector<bool> materialised(n, false), pending(n, false), prefetched(n, false);
  std::vector<int> users(n, 0);
  std::vector<std::int64_t> gathers(n, 0);
  const bool keep = s.config().spec.zero.keep_parameters;
  std::vector<std::size_t>* started = nullptr;  // the pass's list the next starts go to, when recorded
  auto start = [&](std::size_t b) {
    if (materialised[b] || pending[b]) return;
    pending[b] = true;
    ++gathers[b];
    if (started != nullptr) started->push_back(b);
  };
  auto acquire = [&](const std::vector<std::size_t>& list) {
    for (std::size_t b : list) start(b);
    for (std::size_t b : list) {
      if (!materialised[b]) {
        start(b);
        pending[b] = false;
        materialised[b] = true;
      }
      ++users[b];
      prefetched[b] = false;
    }
  };
  auto release = [&](const std::vector<std::size_t>& list) {
    for (std::size_t b : list) {
      if (users[b] > 0) --users[b];
      if (!keep && users[b] == 0 && !prefetched[b]) materialised[b] = false;
    }
  };
  // The trainer gives the engine this order (set_pass_order): each pass prefetches the next one's.
  const std::vector<UnitPass> passes = stage_unit_passes(schedule, partition, stage);
  if (passes_out != nullptr) passes_out->assign(passes.size(), PassStarts{});
  for (std::size_t i = 0; i < passes.size(); ++i) {
    PassStarts* here = passes_out != nullptr ? &(*passes_out)[i] : nullptr;
    if (here != nullptr) here->unit = passes[i].unit, here->direction = passes[i].direction;
    started = here != nullptr ? &here->waited : nullptr;
    acquire(reads(passes[i].unit, passes[i].direction));
    started = here != nullptr ? &here->ahead : nullptr;
    if (i + 1 < passes.size())
      for (std::size_t b : reads(passes[i + 1].unit, passes[i + 1].direction)) {
        prefetched[b] = true;
        start(b);
      }
    release(reads(passes[i].unit, passes[i].direction));
  }
  return gathers;  // release_all then frees everything: the next step starts alike
}

}  // namespace

std::map<LedgerKey, LedgerTotals> StepCommPlan::totals() const {
  std::map<LedgerKey, LedgerTotals> out;
  for (const CountedCall& c : calls) {
    const LedgerEntry e = to_ledger_entry(c.call);
    LedgerTotals& t = out[LedgerKey{e.phase, e.group, e.op}];
    t.calls += c.count;
    t.logical_bytes += e.logical_bytes * c.count;
    t.bus_bytes += e.bus_bytes * static_cast<double>(c.count);
    t.group_size = e.group_size;
  }
  return out;
}

std::int64_t StepCommPlan::logical_bytes() const {
  std::int64_t total = 0;
  for (const auto& [key, t] : totals()) total += t.logical_bytes;
  return total;
}

Schedule step_schedule(const StepCommConfig& c) {
  const ParallelLayout& l = c.spec.layout;
  return make_schedule(l.schedule, l.pp, l.micro_batches, l.chunks, l.group_size);
}

std::vector<BucketInput> stage_parameters(const StepCommConfig& config, int stage) {
  const StepShapes s(config);
  const StagePartition partition = stage_partition(config.spec);
  require(stage >= 0 && stage < partition.stages(), "stage ", stage, " is outside [0, ", partition.stages(), ")");
  return parameters_of(s, partition, stage);
}

BucketPlan stage_bucket_plan(const StepCommConfig& config, int stage) {
  const StepShapes s(config);
  return bucket_plan_of(s, stage_parameters(config, stage));
}

namespace {

// ZeRO-3's replay on each of `stages` (nothing below stage 3): `visit(i, stage, shapes, partition,
// schedule, params, plan)` with the stage's parameters and their bucket plan, set up once for all.
template <class Visit>
void each_zero3_stage(const StepCommConfig& config, const std::vector<int>& stages, Visit visit) {
  if (config.spec.zero.stage != 3) return;
  const StepShapes s(config);
  const StagePartition partition = stage_partition(config.spec);
  const Schedule schedule = step_schedule(config);
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const int stage = stages[i];
    require(stage >= 0 && stage < partition.stages(), "stage ", stage, " is outside [0, ", partition.stages(), ")");
    const std::vector<BucketInput> params = parameters_of(s, partition, stage);
    visit(i, stage, s, partition, schedule, params, bucket_plan_of(s, params));
  }
}

}  // namespace

std::vector<GatherCall> zero3_gather_calls(const StepCommConfig& config, int stage) {
  std::vector<GatherCall> out;
  each_zero3_stage(config, {stage},
                   [&](std::size_t, int, const StepShapes& s, const StagePartition& partition, const Schedule& schedule,
                       const std::vector<BucketInput>& params, const BucketPlan& plan) {
                     const std::vector<std::int64_t> gathers = stage3_gathers(s, partition, schedule, stage, params, plan);
                     for (std::size_t b = 0; b < plan.buckets.size(); ++b) {
                       const int n = s.size(shard_group(plan.buckets[b]));
                       if (n > 1 && gathers[b] > 0) out.push_back({plan.buckets[b].padded, plan.buckets[b].dtype, n, gathers[b]});
                     }
                   });
  return out;
}

std::vector<std::vector<PassGathers>> zero3_gather_passes(const StepCommConfig& config, const std::vector<int>& stages) {
  std::vector<std::vector<PassGathers>> out(stages.size());
  each_zero3_stage(config, stages, [&](std::size_t i, int stage, const StepShapes& s, const StagePartition& partition,
                                       const Schedule& schedule, const std::vector<BucketInput>& params,
                                       const BucketPlan& plan) {
    std::vector<PassStarts> starts;
    stage3_gathers(s, partition, schedule, stage, params, plan, &starts);
    // Each action's unit passes, as stage_unit_passes lists them: a chunk's units forward, or in
    // reverse for a backward; a weight pass has none.
    std::vector<int> action_of;
    const std::vector<UnitSpan> spans = partition.stage_units(stage);
    const auto& actions = schedule.actions[static_cast<std::size_t>(stage)];
    for (std::size_t a = 0; a < actions.size(); ++a) {
      if (actions[a].op != PassKind::F && actions[a].op != PassKind::B && actions[a].op != PassKind::BW) continue;
      const UnitSpan& r = spans[static_cast<std::size_t>(actions[a].chunk)];
      action_of.insert(action_of.end(), static_cast<std::size_t>(r.last - r.first + 1), static_cast<int>(a));
    }
    require(action_of.size() == starts.size(), "the ZeRO-3 replay has ", starts.size(), " unit passes; the schedule ",
            action_of.size());
    auto calls = [&](const std::vector<std::size_t>& buckets) {
      std::vector<GatherCall> list;
      for (std::size_t b : buckets) {
        const int n = s.size(shard_group(plan.buckets[b]));
        if (n > 1) list.push_back({plan.buckets[b].padded, plan.buckets[b].dtype, n, 1});
      }
      return list;
    };
    out[i].reserve(starts.size());
    for (std::size_t k = 0; k < starts.size(); ++k)
      out[i].push_back({starts[k].unit, starts[k].direction, action_of[k], calls(starts[k].waited), calls(starts[k].ahead)});
  });
  return out;
}

StepCommPlan plan_step_comm(const StepCommConfig& config, int stage) {
  const StepShapes s(config);
  const StagePartition partition = stage_partition(config.spec);
  const Schedule schedule = step_schedule(config);
  require(stage >= 0 && stage < partition.stages(), "stage ", stage, " is outside [0, ", partition.stages(), ")");
  const int L = partition.n_layer(), head = L + 1;
  const std::int64_t m = config.spec.layout.micro_batches;
  const DType dt = s.dtype();
  StepCommPlan out;
  out.stage = stage;
  CallList list(s, out.calls);

  // Forward and backward: every (micro-batch, chunk) runs F, B and W once, whatever the schedule.
  // Pipeline: per (micro-batch, chunk), a virtual stage after the first receives the activation
  // and sends the input gradient back; one before the last sends the activation on and receives
  // the output gradient.  Each receive of a slice is all-gathered over the replication group.
  // A chunk runs every micro-batch, or under DualPipe's two routes half of them.
  std::int64_t block_passes = 0, receives = 0, sends = 0, embedding_passes = 0, head_passes = 0;
  for (int c = 0; c < partition.chunks(); ++c) {
    const UnitSpan r = partition.stage_units(stage).at(static_cast<std::size_t>(c));
    const int vs = partition.virtual_stage(stage, c);
    const std::int64_t mc = schedule.micro_batches_through(stage, c);
    if (r.first == 0) embedding_passes += mc;
    if (r.last == head) head_passes += mc;
    block_passes += mc * std::max(0, std::min(r.last, L) - std::max(r.first, 1) + 1);
    // Neighbours on this stage (the bottom of a V) hand over in place, with no transfer.
    if (!schedule.first(vs) && partition.stage_of(vs - 1) != stage) receives += mc, sends += mc;
    if (!schedule.last(vs) && partition.stage_of(vs + 1) != stage) receives += mc, sends += mc;
  }
  list.add_layer("block", s.attention(), block_passes);
  list.add_layer("block", s.mlp(), block_passes);
  list.add_layer("block", s.layernorm(), 2 * block_passes);
  if (config.spec.recompute == Recompute::full) {
    list.add_layer_recomputed("block", s.attention(), block_passes);
    list.add_layer_recomputed("block", s.mlp(), block_passes);
    list.add_layer_recomputed("block", s.layernorm(), 2 * block_passes);
  }
  if (embedding_passes > 0) embedding_calls(s, list, embedding_passes);
  if (head_passes > 0) head_calls(s, list, head_passes);
  list.add("boundary", phase::pipeline, group::pp, CollectiveOp::send, s.wire_elements(), dt, sends);
  list.add("boundary", phase::pipeline, group::pp, CollectiveOp::recv, s.wire_elements(), dt, receives);
  if (s.slices() > 1)
    list.add("boundary", phase::pipeline, s.split().replicated, CollectiveOp::all_gather, s.residual_elements(), dt,
             receives);

  // Gradient synchronisation.
  const std::vector<BucketInput> params = parameters_of(s, partition, stage);
  const BucketPlan plan = bucket_plan_of(s, params);
  // Copies of a key/value head: each held block's attention weight sums its K/V columns over tp.kv
  // before the data-parallel sum (tp/parameter.cpp; zero/gradient_reducer.cpp, once per round).
  const std::int64_t kv_sums = s.kv_copy_elements() > 0 ? held_blocks(partition, stage) : 0;
  const DType grad_dtype = config.spec.precision.grad_reduce;
  if (config.spec.zero.stage == 0) {
    if (kv_sums > 0)
      list.add(phase::grad_sync, phase::grad_sync, group::tp_kv, CollectiveOp::all_reduce, s.kv_copy_elements(),
               grad_dtype, kv_sums);
    for (const BucketInput& p : params) {
      for (const std::string& g : p.partial_groups)
        list.add(phase::grad_sync, phase::grad_sync, g, CollectiveOp::all_reduce, p.numel, p.gradient_dtype(), 1);
      list.add_if_many(phase::grad_sync, phase::grad_sync, group::dp, CollectiveOp::all_reduce, p.numel,
                       p.gradient_dtype(), 1);
    }
  } else {
    // A round per micro-batch with reduce_per_micro_batch (stages 2–3: each writer reports after
    // every weight pass, m times), else one per step.
    const std::int64_t rounds = config.spec.zero.reduce_per_micro_batch && config.spec.zero.stage >= 2 ? m : 1;
    if (kv_sums > 0)
      list.add(phase::grad_sync, phase::grad_sync, group::tp_kv, CollectiveOp::all_reduce, s.kv_copy_elements(),
               grad_dtype, kv_sums * rounds);
    for (const Bucket& b : plan.buckets) {
      list.add_if_many(phase::grad_sync, phase::grad_sync, shard_group(b), CollectiveOp::reduce_scatter, b.padded,
                       b.grad_dtype, rounds);
      for (const std::string& g : b.partial_groups)
        list.add(phase::grad_sync, phase::grad_sync, g, CollectiveOp::all_reduce, b.shard, b.grad_dtype, 1);
    }
  }

  // The loss: summed on the stage of the last virtual stage over the logits' row split and the
  // replicas, then broadcast; under DualPipe the two stages that end a route (0 and p − 1) first
  // all-reduce their per-micro-batch sums over pp, and stage 0 reduces the total.
  const std::vector<int> loss_stages = schedule.loss_stages();
  if (loss_stages.size() > 1)
    list.add_if_many(phase::loss, phase::loss, group::pp, CollectiveOp::all_reduce, m, DType::f64, 1);
  if (stage == loss_stages.front()) {
    list.add_if_many(phase::loss, phase::loss, s.split().cols, CollectiveOp::all_reduce, 1, DType::f64, 1);
    list.add_if_many(phase::loss, phase::loss, group::dp, CollectiveOp::all_reduce, 1, DType::f64, 1);
  }
  list.add_if_many(phase::loss, phase::loss, group::pp, CollectiveOp::broadcast, 1, DType::f64, 1);

  // The optimizer: the norm's sum (over dp first when the gradients are sharded), then at stages
  // 1–2 every bucket's updated values all-gathered over dp.
  if (config.spec.zero.stage >= 1)
    list.add_if_many(phase::optimizer, phase::optimizer, group::dp, CollectiveOp::all_reduce, 1, DType::f64, 1);
  list.add_if_many(phase::optimizer, phase::optimizer, group::tp_pp, CollectiveOp::all_reduce, 1, DType::f64, 1);
  if (config.spec.zero.stage == 1 || config.spec.zero.stage == 2)
    for (const Bucket& b : plan.buckets)
      list.add_if_many(phase::optimizer, phase::optimizer, shard_group(b), CollectiveOp::all_gather, b.padded,
                       b.dtype, 1);

  // ZeRO-3's parameter gathers.
  if (config.spec.zero.stage == 3) {
    const std::vector<std::int64_t> gathers = stage3_gathers(s, partition, schedule, stage, params, plan);
    for (std::size_t b = 0; b < plan.buckets.size(); ++b)
      list.add_if_many(phase::param_gather, phase::param_gather, shard_group(plan.buckets[b]), CollectiveOp::all_gather,
                       plan.buckets[b].padded, plan.buckets[b].dtype, gathers[b]);
  }
  return out;
}

std::string format_step_comm(const StepCommPlan& plan) {
  std::ostringstream os;
  os << fmt::format("{:<13} {:<13} {:<16} {:<15} {:>4} {:>12} {:>7} {:>14}\n", "part", "phase", "group", "op", "n",
                    "elements", "calls", "logical bytes");
  for (const CountedCall& c : plan.calls) {
    const LedgerEntry e = to_ledger_entry(c.call);
    os << fmt::format("{:<13} {:<13} {:<16} {:<15} {:>4} {:>12} {:>7} {:>14}\n", c.part, c.call.phase, c.call.group,
                      collective_name(c.call.op), c.call.group_size, c.call.elements, c.count,
                      e.logical_bytes * c.count);
  }
  os << fmt::format("total logical bytes {}\n", plan.logical_bytes());
  return os.str();
}

}  // namespace mdtp::cost
