#include "zero/shard_optimizer.hpp"

#include <cmath>

#include "mesh/mesh.hpp"
#include "tp/replicated_columns.hpp"

namespace mdtp {

ShardOptimizer::ShardOptimizer(const OptimizerSpec& config, const ZeroConfig& zero, const ZeroLayout& layout,
                               ZeroBuffers& buffers, const Mesh& mesh, const Backend& backend)
    : config_(config), offload_(zero.offload), layout_(layout), buffers_(buffers), mesh_(mesh), backend_(backend),
      dp_group_(zero.data_parallel_group), model_group_(zero.model_parallel_group), state_backend_(&backend) {
  validate(config_);
  if (offload_ && backend.device() != DeviceKind::host) {
    own_host_ = make_host_backend();
    state_backend_ = own_host_.get();
  }
  const std::size_t n = layout.bucket_count();
  exp_avg_.resize(n);
  exp_avg_sq_.resize(n);
  master_.resize(n);
  host_grad_.resize(n);
  for (std::size_t b = 0; b < n; ++b) {
    const Bucket& bucket = layout.bucket(b);
    const Shape shard{bucket.shard};
    if (has_moments()) {
      exp_avg_[b] = state_backend_->zeros(shard, bucket.state_dtype(), MemCategory::optimizer_state);
      exp_avg_sq_[b] = state_backend_->zeros(shard, bucket.state_dtype(), MemCategory::optimizer_state);
    }
    if (offload_ || is_16bit(bucket.dtype)) {  // masters from the current values (exact)
      master_[b] = state_backend_->empty(shard, bucket.state_dtype(), MemCategory::master_weights);
      transfer(backend_, buffers_.value_shard(b), *state_backend_, master_[b]);
    }
    if (offload_) host_grad_[b] = state_backend_->zeros(shard, bucket.state_dtype(), MemCategory::gradients);
  }
}

double ShardOptimizer::grad_norm() const {
  double local = 0.0;
  for (std::size_t b = 0; b < layout_.bucket_count(); ++b) {
    Tensor& shard = buffers_.grad_shard(b);
    for (const ShardSegment& s : layout_.segments(b, layout_.shard_rank(b))) {
      const Tensor segment = shard.row_slice(s.shard_offset, s.shard_offset + s.numel);
      double squares = backend_.sum_squares(segment);
      const Parameter& p = *layout_.params().at(s.param).param;
      if (p.replicated_columns)  // counted on the first copy only
        squares -= uncounted_squares(segment, s.param_offset, layout_.shape(s.param).back(), *p.replicated_columns,
                                     mesh_, backend_);
      local += squares / layout_.copies(s.param);
    }
  }
  Tensor total = backend_.from_f64({local}, {1}, DType::f64, MemCategory::other);
  for (const std::string& group : {dp_group_, model_group_}) {
    Communicator& comm = mesh_.comm(group);
    if (comm.size() > 1) comm.all_reduce(total);
  }
  return std::sqrt(backend_.to_f64(total)[0]);
}

void ShardOptimizer::update(double grad_scale) {
  ++steps_;
  const Backend& state = *state_backend_;
  for (std::size_t b = 0; b < layout_.bucket_count(); ++b) {
    // With master weights (16-bit values, or offload) the update writes the master, which is then
    // rounded into the value shard; offload reads a host copy of the gradient.
    const bool masters = master_[b].defined();
    Tensor& target = masters ? master_[b] : buffers_.value_shard(b);
    const Tensor* grad = &buffers_.grad_shard(b);
    if (offload_) {
      transfer(backend_, *grad, state, host_grad_[b]);
      grad = &host_grad_[b];
    }
    apply_update(state, config_, target, *grad, exp_avg_[b], exp_avg_sq_[b], layout_.bucket(b).decays, steps_,
                 grad_scale);
    if (masters) refresh_value(b);
  }
}

void ShardOptimizer::refresh_value(std::size_t b) {
  if (master_.at(b).defined()) transfer(*state_backend_, master_[b], backend_, buffers_.value_shard(b));
}

}  // namespace mdtp
