#pragma once
// ShardOptimizer: SGD or AdamW on this rank's shard of every bucket (docs/zero.md §6), with the
// optimizer state for that shard only.  Every update is element-wise and every bucket is
// homogeneous in weight decay, so one call per bucket shard applies exactly what the unsharded
// Optimizer applies to the same elements.  Padding stays zero: its gradient is zero, and so is
// every update of a zero value.
//
// The global gradient norm counts each element once: the squares of each parameter's piece of
// the shard, divided by its replication count, summed in float64 and all-reduced over dp (the
// shards) and the model-parallel group (the TP shards and the pipeline stages).
//
// Master weights: bf16/f16 values are updated through f32 master shards with f32 moments (mixed
// precision); the updated master is rounded once into the value shard, which therefore always
// equals round(master).  Offload keeps masters at any dtype.
//
// Offload: master weights, moments and a copy of the gradient shard live in host memory and the
// update runs there (the host backend's AdamW); the updated master is copied back into the
// parameter shard.  On a host backend the same backend allocates them (one memory tracker), in
// separate buffers; elsewhere a host backend of its own does.
#include <memory>
#include <vector>

#include "zero/zero_buffers.hpp"
#include "zero/zero_config.hpp"

namespace mdtp {

class ShardOptimizer {
 public:
  ShardOptimizer(const OptimizerSpec& config, const ZeroConfig& zero, const ZeroLayout& layout, ZeroBuffers& buffers,
                 const Mesh& mesh, const Backend& backend);

  // ‖g‖₂ over the whole model from the reduced gradient shards (collective: dp, model group).
  double grad_norm() const;
  // One step on every shard with the gradients multiplied by `grad_scale` (clipping).
  void update(double grad_scale);

  const OptimizerSpec& config() const { return config_; }
  bool has_moments() const { return config_.kind == OptimizerKind::adamw; }
  std::int64_t step_count() const { return steps_; }
  void set_step_count(std::int64_t steps) { steps_ = steps; }
  // Where moments and master weights live (the host backend with offload).
  const Backend& state_backend() const { return *state_backend_; }
  // This rank's shard of bucket b's moments (undefined with SGD).
  Tensor& exp_avg(std::size_t b) { return exp_avg_.at(b); }
  Tensor& exp_avg_sq(std::size_t b) { return exp_avg_sq_.at(b); }
  // Bucket b's master shard, with 16-bit values or offload (else undefined).  After new values are
  // loaded into a master, refresh_value(b) rounds it into the value shard.
  Tensor& master(std::size_t b) { return master_.at(b); }
  bool has_master(std::size_t b) const { return master_.at(b).defined(); }
  void refresh_value(std::size_t b);
  bool offloaded() const { return offload_; }

 private:
  OptimizerSpec config_;
  bool offload_;
  const ZeroLayout& layout_;
  ZeroBuffers& buffers_;
  const Mesh& mesh_;
  const Backend& backend_;
  std::string dp_group_, model_group_;
  std::unique_ptr<Backend> own_host_;  // offload from a device backend
  const Backend* state_backend_;
  std::int64_t steps_ = 0;
  std::vector<Tensor> exp_avg_, exp_avg_sq_, master_, host_grad_;
};

}  // namespace mdtp
