#include "zero/zero_engine.hpp"

#include <cmath>

#include "mesh/mesh.hpp"
#include "spec/names.hpp"

namespace mdtp {
namespace {

ZeroConfig validated(const ZeroConfig& zero, const OptimizerSpec& optimizer) {
  validate(zero, optimizer);
  return zero;
}

const char* tensor_name(ZeroTensor what) {
  switch (what) {
    case ZeroTensor::value: return "value";
    case ZeroTensor::exp_avg: return "exp_avg";
    case ZeroTensor::exp_avg_sq: return "exp_avg_sq";
    case ZeroTensor::grad: return "gradient";
  }
  return "?";
}

}  // namespace

// The engine's side of the model's UnitHooks; calls the hooks attached before it, nested inside
// its own work (gathers happen before them, releases after).
class ZeroEngine::Hooks final : public UnitHooks {
 public:
  Hooks(ZeroEngine& engine, UnitHooks* next) : engine_(engine), next_(next) {}
  UnitHooks* next() const { return next_; }
  void before_forward(int unit, int microbatch) override {
    engine_.before_pass(unit, +1);
    if (next_) next_->before_forward(unit, microbatch);
  }
  void after_forward(int unit, int microbatch) override {
    if (next_) next_->after_forward(unit, microbatch);
    engine_.after_pass(unit, +1);
  }
  void before_backward_input(int unit, int microbatch) override {
    // The unit's backward passes add into these buckets (LayerNorm's in this pass already).
    engine_.open_gradients(unit);
    engine_.before_pass(unit, -1);
    if (next_) next_->before_backward_input(unit, microbatch);
  }
  void after_backward_input(int unit, int microbatch) override {
    if (next_) next_->after_backward_input(unit, microbatch);
    engine_.after_pass(unit, -1);
  }
  void before_backward_weight(int unit, int microbatch) override {
    // Reducing per micro-batch, an earlier micro-batch's weight pass may have handed this unit's
    // buckets to a reduction since its backward-input pass (ZB-H1 defers W): open fresh ones.
    // Otherwise they are still open from the backward-input pass and this does nothing.
    engine_.open_gradients(unit);
    if (next_) next_->before_backward_weight(unit, microbatch);
  }
  void after_backward_weight(int unit, int microbatch) override {
    if (engine_.zero_.reduce_per_micro_batch) engine_.reducer_->unit_ready(unit);
    if (next_) next_->after_backward_weight(unit, microbatch);
  }
  void grads_ready(int unit) override {
    if (!engine_.zero_.reduce_per_micro_batch) engine_.reducer_->unit_ready(unit);
    if (next_) next_->grads_ready(unit);
  }

 private:
  ZeroEngine& engine_;
  UnitHooks* next_;
};

ZeroEngine::ZeroEngine(const ZeroConfig& zero, const OptimizerSpec& optimizer, GptModel& model, const Mesh& mesh,
                       const Backend& backend)
    : zero_(validated(zero, optimizer)), optimizer_(optimizer), model_(model), mesh_(mesh), backend_(backend),
      layout_(model, mesh, zero_) {
  // Local and the same on every rank: refused before any collective.
  require(!model.mode().context().defer_parameters || zero_.stage == 3,
          "ZeroEngine: a model built without parameter storage (defer_parameters) needs ZeRO stage 3, which "
          "initialises it shard by shard; got stage ",
          zero_.stage);
  if (zero_.stage == 0) {
    unsharded_ = std::make_unique<Optimizer>(optimizer_, model.parameters(), mesh, backend, zero_.model_parallel_group);
    return;
  }
  buffers_ = std::make_unique<ZeroBuffers>(layout_, zero_.stage, backend);
  reducer_ = std::make_unique<GradientReducer>(layout_, *buffers_, mesh, backend);
  sharded_ = std::make_unique<ShardOptimizer>(optimizer_, zero_, layout_, *buffers_, mesh, backend);
  if (zero_.stage == 3)
    gatherer_ = std::make_unique<ParameterGatherer>(layout_, *buffers_, mesh, backend, zero_.keep_parameters);
  if (zero_.stage >= 2) {
    hooks_ = std::make_unique<Hooks>(*this, model.hooks());
    model.set_hooks(hooks_.get());
  }
}

ZeroEngine::~ZeroEngine() {
  if (hooks_ && model_.hooks() == hooks_.get()) model_.set_hooks(hooks_->next());
}

void ZeroEngine::begin_step() {
  next_pass_ = 0;
  if (unsharded_) {
    model_.zero_gradients();
  } else {
    buffers_->begin_gradients();
    reducer_->begin_step();
  }
  phase_ = Phase::accumulating;
}

void ZeroEngine::finish_gradients() {
  require(phase_ == Phase::accumulating, "ZeroEngine: finish_gradients() needs begin_step() and the step's backward first");
  if (unsharded_) {
    model_.reduce_gradients();
  } else {
    if (gatherer_) gatherer_->release_all();
    reducer_->finish();
  }
  phase_ = Phase::reduced;
}

double ZeroEngine::step(double loss_scale) {
  require(phase_ == Phase::reduced, "ZeroEngine: step() needs finish_gradients() first");
  require(loss_scale > 0.0, "ZeroEngine: the loss scale must be positive; got ", loss_scale);
  const double norm = unsharded_ ? unsharded_->step(loss_scale) : sharded_step(loss_scale);
  // A non-finite norm applied nothing: the reduced gradients stay readable, so that the caller can
  // name the first non-finite element (train/fault_guard.hpp); the next begin_step starts afresh.
  phase_ = std::isfinite(norm) ? Phase::idle : Phase::reduced;
  return norm;
}

double ZeroEngine::sharded_step(double loss_scale) {
  PhaseScope phase(mesh_.ledger(), phase::optimizer);
  const double norm = sharded_->grad_norm() / loss_scale;
  // Every rank holds the same norm (all-reduced): a non-finite one applies nothing, everywhere.
  if (!std::isfinite(norm)) return norm;
  sharded_->update(clip_scale(optimizer_, norm) / loss_scale);
  if (zero_.stage < 3) {
    // Every rank's updated shard into every full bucket, in place (the shard is its own slot),
    // over the group the bucket is sharded over.
    std::vector<CommHandle> gathers;
    for (std::size_t b = 0; b < layout_.bucket_count(); ++b) {
      Communicator& group = layout_.shard_comm(b);
      if (group.size() > 1) gathers.push_back(group.iall_gather(buffers_->value_shard(b), buffers_->value_full(b)));
    }
    for (CommHandle& h : gathers) h.wait();
  }
  return norm;
}

void ZeroEngine::release_parameters() {
  if (gatherer_) gatherer_->release_all();
}

std::size_t ZeroEngine::parameter_index(const std::string& name) const {
  for (std::size_t i = 0; i < parameters().size(); ++i)
    if (parameters()[i].name() == name) return i;
  throw_error("ZeroEngine: no parameter named '", name, "' on this rank");
}

std::int64_t ZeroEngine::step_count() const { return unsharded_ ? unsharded_->step_count() : sharded_->step_count(); }

void ZeroEngine::set_step_count(std::int64_t steps) {
  require(steps >= 0, "ZeroEngine: the step count must be >= 0; got ", steps);
  if (unsharded_) unsharded_->set_step_count(steps);
  else sharded_->set_step_count(steps);
}

const Backend& ZeroEngine::state_backend() const { return sharded_ ? sharded_->state_backend() : backend_; }

// ---- Stages 2–3: gradient buckets around each pass ------------------------------------------------

void ZeroEngine::open_gradients(int unit) {
  const std::vector<std::size_t>& buckets = layout_.writes(unit);
  reducer_->before_open(buckets);
  buffers_->open_gradients(buckets);
}

// ---- Stage 3: parameters around each pass ---------------------------------------------------------

const std::vector<std::size_t>& ZeroEngine::reads(int unit, int direction) const {
  return direction > 0 ? layout_.forward_reads(unit) : layout_.backward_reads(unit);
}

void ZeroEngine::set_pass_order(std::vector<UnitPass> passes) {
  pass_order_ = std::move(passes);
  next_pass_ = 0;
}

void ZeroEngine::before_pass(int unit, int direction) {
  if (!gatherer_) return;
  gatherer_->acquire(reads(unit, direction));
  const bool in_order = next_pass_ < pass_order_.size() && pass_order_[next_pass_] == UnitPass{unit, direction};
  if (in_order) {
    ++next_pass_;
    if (next_pass_ < pass_order_.size())
      gatherer_->prefetch(reads(pass_order_[next_pass_].unit, pass_order_[next_pass_].direction));
    return;
  }
  next_pass_ = pass_order_.size();  // out of order: the rest of the step uses the chunk rule
  const int next = layout_.next_unit(unit, direction);
  if (next >= 0) gatherer_->prefetch(reads(next, direction));
}

void ZeroEngine::after_pass(int unit, int direction) {
  if (gatherer_) gatherer_->release(reads(unit, direction));
}

// ---- Checkpoints ----------------------------------------------------------------------------------

// Where bucket b's shard of `what` lives: the weights are the master shard where there is one (16-bit
// values, offload), else the value shard.
Tensor& ZeroEngine::shard_of(std::size_t b, ZeroTensor what, const Backend*& on) {
  on = &sharded_->state_backend();
  if (what == ZeroTensor::exp_avg) return sharded_->exp_avg(b);
  if (what == ZeroTensor::exp_avg_sq) return sharded_->exp_avg_sq(b);
  if (what == ZeroTensor::value && sharded_->has_master(b)) return sharded_->master(b);
  on = &backend_;
  return what == ZeroTensor::grad ? buffers_->grad_shard(b) : buffers_->value_shard(b);
}

Tensor ZeroEngine::tp_shard(std::size_t param, ZeroTensor what) {
  require(param < parameters().size(), "ZeroEngine: parameter index ", param, " out of range (", parameters().size(),
          " parameters)");
  const bool moment = what == ZeroTensor::exp_avg || what == ZeroTensor::exp_avg_sq;
  require(!moment || has_moments(), "ZeroEngine: ", tensor_name(what), " of ", parameters()[param].name(),
          " asked for, but the optimizer is ", optimizer_kind_name(optimizer_.kind), " (no moments)");
  require(what != ZeroTensor::grad || phase_ == Phase::reduced, "ZeroEngine: the gradient of ",
          parameters()[param].name(), " is read between finish_gradients() and step()");
  if (unsharded_) {
    if (what == ZeroTensor::value)
      return unsharded_->has_masters() ? unsharded_->master(param) : parameters()[param].param->value;
    if (what == ZeroTensor::grad) return parameters()[param].param->grad;
    return what == ZeroTensor::exp_avg ? unsharded_->exp_avg(param) : unsharded_->exp_avg_sq(param);
  }
  const std::size_t b = layout_.bucket_index(param);
  if (what == ZeroTensor::value && zero_.stage < 3 && !sharded_->has_master(b)) return parameters()[param].param->value;
  // Each element lives in one rank's shard: the others contribute zeros to a sum over the shard
  // group.
  const Backend* on = nullptr;
  const Tensor& shard = shard_of(b, what, on);
  Tensor out = backend_.zeros(layout_.shape(param), shard.dtype(), MemCategory::communication);
  for (const ShardSegment& s : layout_.segments(b, layout_.shard_rank(b)))
    if (s.param == param) copy_elements(*on, shard, s.shard_offset, backend_, out, s.param_offset, s.numel);
  Communicator& group = layout_.shard_comm(b);
  if (group.size() > 1) group.all_reduce(out);
  return out;
}

std::vector<double> ZeroEngine::gather_full(std::size_t param, ZeroTensor what) {
  PhaseScope phase(mesh_.ledger(), phase::checkpoint);
  const Tensor local = tp_shard(param, what);
  return gather_logical(parameters()[param], local, mesh_, backend_);
}

void ZeroEngine::check_loadable(std::size_t param, ZeroTensor what) const {
  require(param < parameters().size(), "ZeroEngine: parameter index ", param, " out of range (", parameters().size(),
          " parameters)");
  // A gradient is replaced only where the step would read it: between finish_gradients and step
  // (tests inject the same gradients into every mode and stage).
  require(what != ZeroTensor::grad || phase_ == Phase::reduced, "ZeroEngine: the gradient of ",
          parameters()[param].name(), " is loaded between finish_gradients() and step()");
  require(what == ZeroTensor::value || has_moments(), "ZeroEngine: cannot load ", tensor_name(what), " of ",
          parameters()[param].name(), ": the optimizer is ", optimizer_kind_name(optimizer_.kind), " (no moments)");
}

void ZeroEngine::load_full(std::size_t param, ZeroTensor what, const std::vector<double>& full) {
  check_loadable(param, what);
  const ModelParam& p = parameters()[param];
  const bool weights = what == ZeroTensor::value;
  if (unsharded_) {
    // The weights go to the masters where there are (16-bit parameters), which then round into the
    // parameter.
    Tensor& target = weights ? (unsharded_->has_masters() ? unsharded_->master(param) : p.param->value)
                     : what == ZeroTensor::grad    ? p.param->grad
                     : what == ZeroTensor::exp_avg ? unsharded_->exp_avg(param)
                                                   : unsharded_->exp_avg_sq(param);
    Tensor local = backend_.empty(target.shape(), target.dtype(), MemCategory::communication);
    scatter_logical(p, full, local, mesh_, backend_);
    backend_.copy(local, target);
    if (weights) unsharded_->refresh_value(param);
    return;
  }
  const std::size_t b = layout_.bucket_index(param);
  const Backend* on = nullptr;
  Tensor& shard = shard_of(b, what, on);
  Tensor local = backend_.empty(layout_.shape(param), shard.dtype(), MemCategory::communication);
  scatter_logical(p, full, local, mesh_, backend_);
  const bool masters = weights && sharded_->has_master(b);
  // Stages 1–2 hold every value in full (the value shard is a view of it); stage 3 only the shard.
  const bool full_values = weights && zero_.stage < 3;
  if (full_values) backend_.convert(local, p.param->value);  // the value is the weight, rounded once
  for (const ShardSegment& s : layout_.segments(b, layout_.shard_rank(b)))
    if (s.param == param && (!full_values || masters))
      copy_elements(backend_, local, s.param_offset, *on, shard, s.shard_offset, s.numel);
  if (masters && !full_values) sharded_->refresh_value(b);
}

void ZeroEngine::load_shard(std::size_t param, ZeroTensor what, const CheckpointBlockReader& read) {
  require(loads_shards(), "ZeroEngine: load_shard is stage 3's; this engine runs stage ", zero_.stage);
  check_loadable(param, what);
  const ModelParam& p = parameters()[param];
  const std::size_t b = layout_.bucket_index(param);
  const Backend* on = nullptr;
  Tensor& shard = shard_of(b, what, on);
  for (const ShardSegment& s : layout_.segments(b, layout_.shard_rank(b))) {
    if (s.param != param) continue;
    std::vector<double> values(static_cast<std::size_t>(s.numel));
    checkpoint_values(p, mesh_, s.param_offset, s.numel, read, values.data());
    const Tensor piece = backend_.from_f64(values, {s.numel}, shard.dtype(), MemCategory::communication);
    copy_elements(backend_, piece, 0, *on, shard, s.shard_offset, s.numel);
  }
  if (what == ZeroTensor::value && sharded_->has_master(b)) sharded_->refresh_value(b);
}

}  // namespace mdtp
