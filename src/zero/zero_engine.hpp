#pragma once
// ZeroEngine: the optimizer of a GptModel with ZeRO stage 0–3 over the data-parallel group
// (docs/zero.md).  One object drives a step, whatever runs forward and backward in between:
//
//   ZeroEngine engine(zero, optimizer, model, mesh, backend);
//   for each step:
//     engine.begin_step();           // stage 1 zeroes its gradients; 2–3 open buckets as backward reaches them
//     … the model's chunks: forward / backward_input / backward_weight per micro-batch
//       (last_of_step on the step's last W of each chunk) …
//     engine.finish_gradients();     // phase grad-sync: the rest of the reduction
//     double norm = engine.step();   // phase optimizer: norm, clipping, update, all-gather
//
// Stage 0 is the unsharded Optimizer with GptModel::reduce_gradients.  Stages 2–3 attach the
// engine to the model's UnitHooks (forwarding every call to hooks attached before it, which it
// restores when destroyed), to start reduce-scatters during backward and, at stage 3, to gather
// each unit's parameters around its passes.
//
// Construction is local (no collective): the model's current values move into the buckets.  At
// stage 3 the model is therefore built whole first and then sharded.  A checkpoint is read
// through gather_full and written through load_full, which convert between this rank's shards
// and the full (checkpoint-layout) tensors.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "plan/unit_passes.hpp"
#include "zero/gradient_reducer.hpp"
#include "zero/parameter_gatherer.hpp"
#include "zero/shard_optimizer.hpp"

namespace mdtp {

// What a checkpoint holds per parameter (value and AdamW moments), and the reduced gradient a
// gradient dump reads (valid between finish_gradients and step).
enum class ZeroTensor { value, exp_avg, exp_avg_sq, grad };

class ZeroEngine {
 public:
  // Validates both configurations on every rank first (an mdtp::Error naming the value).  The
  // model, mesh and backend must outlive the engine.
  ZeroEngine(const ZeroConfig& zero, const OptimizerSpec& optimizer, GptModel& model, const Mesh& mesh,
             const Backend& backend);
  ~ZeroEngine();
  ZeroEngine(const ZeroEngine&) = delete;
  ZeroEngine& operator=(const ZeroEngine&) = delete;

  void begin_step();
  // Collective over dp and the partial-sum groups (phase grad-sync).
  void finish_gradients();
  // Returns the global gradient norm before clipping.  Collective (phase optimizer).  A
  // non-finite norm (the same on every rank) applies no update, and the reduced gradients stay
  // readable until the next begin_step.  `loss_scale`: the factor the backward pass was seeded
  // with (f16's loss scale, train/loss_scaler.hpp), divided out of the norm and the update.
  double step(double loss_scale = 1.0);
  // Stage 3: frees every gathered bucket now (finish_gradients does it within a step; this is for
  // passes outside one, such as an evaluation forward with keep_parameters).
  void release_parameters();
  // Stage 3: the order of this rank's unit passes in every step (plan/unit_passes.hpp): while a
  // pass runs, the next one's parameters are prefetched, across chunk boundaries and micro-batches
  // as the schedule goes.  Without it (or when a pass arrives out of this order) the next unit of
  // the same chunk is prefetched.
  void set_pass_order(std::vector<UnitPass> passes);

  const ZeroConfig& config() const { return zero_; }
  const OptimizerSpec& optimizer_config() const { return optimizer_; }
  // The bucket plan (stage 0 plans too, for the record, but reduces parameter by parameter).
  const BucketPlan& plan() const { return layout_.plan(); }
  const ZeroLayout& layout() const { return layout_; }
  // GptModel::parameters(), the index of gather_full and load_full.
  const std::vector<ModelParam>& parameters() const { return layout_.params(); }
  std::size_t parameter_index(const std::string& name) const;
  bool has_moments() const { return optimizer_.kind == OptimizerKind::adamw; }
  std::int64_t step_count() const;
  void set_step_count(std::int64_t steps);
  // Where moments and master weights are allocated (the host backend with offload).
  const Backend& state_backend() const;
  // Buckets whose gradient reduction has started in this step (stages 1–3).
  std::size_t reductions_started() const { return reducer_ ? reducer_->started() : 0; }

  // This rank's tensor-parallel shard of a parameter's value, AdamW moment or reduced gradient
  // (ZeroTensor::grad: after finish_gradients, before step), whole over dp (the
  // parameter's shape, as the unsharded optimizer holds it).  Collective over the bucket's shard
  // group (dp, or dp × depth for 2.5D weights) where the tensor is sharded (moments; values at stage 3): every rank calls it for the same parameter.
  Tensor tp_shard(std::size_t param, ZeroTensor what);
  // The full tensor (checkpoint layout, as gather_logical gives it) of a parameter's value or
  // AdamW moment.  Collective over the shard group and tp.
  std::vector<double> gather_full(std::size_t param, ZeroTensor what);
  // Sets a parameter's value or moment from its full tensor (every rank passes the same values);
  // each rank keeps its shard.  No communication.  Also its reduced gradient (ZeroTensor::grad),
  // between finish_gradients and step: the step then applies the given gradient.
  void load_full(std::size_t param, ZeroTensor what, const std::vector<double>& full);
  // Stage 3: whether load_shard is how a checkpoint is loaded (values and moments live only in the
  // shards, so each rank reads only the parts of the checkpoint its shards hold).
  bool loads_shards() const { return zero_.stage == 3; }
  // Stage 3: sets this rank's shard of a parameter's value or moment from its checkpoint tensor,
  // reading through `read` only the blocks that hold the shard rows its segments cover
  // (model/model_param.hpp checkpoint_values); never the whole tensor.  No communication.
  void load_shard(std::size_t param, ZeroTensor what, const CheckpointBlockReader& read);

 private:
  // What load_full and load_shard accept: a parameter index in range, a value or (AdamW) a moment.
  void check_loadable(std::size_t param, ZeroTensor what) const;
  class Hooks;
  enum class Phase { idle, accumulating, reduced };
  void before_pass(int unit, int direction);
  // Stages 2–3: the full gradient buckets unit `unit` adds into, opened where not open (after any
  // round still reducing one of them has completed).
  void open_gradients(int unit);
  void after_pass(int unit, int direction);
  const std::vector<std::size_t>& reads(int unit, int direction) const;
  // Bucket b's shard of `what` and the backend it lives on.
  double sharded_step(double loss_scale);  // stages 1-3: the norm, then (when finite) the update and the gathers
  Tensor& shard_of(std::size_t b, ZeroTensor what, const Backend*& on);

  ZeroConfig zero_;
  OptimizerSpec optimizer_;
  GptModel& model_;
  const Mesh& mesh_;
  const Backend& backend_;
  ZeroLayout layout_;
  Phase phase_ = Phase::idle;
  std::vector<UnitPass> pass_order_;
  std::size_t next_pass_ = 0;  // index in pass_order_ of the pass expected next
  std::unique_ptr<Optimizer> unsharded_;  // stage 0
  std::unique_ptr<ZeroBuffers> buffers_;
  std::unique_ptr<GradientReducer> reducer_;
  std::unique_ptr<ParameterGatherer> gatherer_;
  std::unique_ptr<ShardOptimizer> sharded_;
  std::unique_ptr<Hooks> hooks_;
};

}  // namespace mdtp
