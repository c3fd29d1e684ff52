#include "model/gpt.hpp"

#include "mesh/mesh.hpp"

namespace mdtp {

GptModel::GptModel(const TensorParallelMode& mode, const GptConfig& config, std::int64_t batch_per_replica,
                   std::string data_parallel_group, const GptKernels* kernels)
    : mode_(mode), ctx_(mode.context()),
      own_kernels_(kernels ? nullptr : make_host_gpt_kernels(ctx_.backend)),
      kernels_(kernels ? *kernels : *own_kernels_), config_(config), batch_(batch_per_replica),
      dp_group_(std::move(data_parallel_group)) {
  validate(config_);
  require(batch_ > 0, "GPT model: the per-replica batch must be positive; got ", batch_);
  dp_size_ = group_size(ctx_.mesh, dp_group_);
  split_ = ModelSplit::of(mode_);
  const std::int64_t rows = batch_ * config_.block_size;
  require(rows % split_.row_parts == 0 && rows % split_.col_parts == 0, "GPT model: the ", rows,
          " token rows of a replica (per-replica batch ", batch_, " × block_size ", config_.block_size,
          ") must be divisible by the row split of the residual (", split_.row_parts, ": ", group_list(split_.rows),
          ") and by the logits' row split (", split_.col_parts, ": ", group_list(split_.cols), ") in mode ", mode_.name());
  embedding_ = std::make_unique<GptEmbedding>(mode_, kernels_, split_, config_);
  for (std::int64_t i = 0; i < config_.n_layer; ++i)
    blocks_.push_back(std::make_unique<TransformerBlock>(mode_, kernels_, "transformer.h." + std::to_string(i), config_, batch_));
  ln_f_ = mode_.layernorm("transformer.ln_f", config_.n_embd, split_.residual);
  head_ = std::make_unique<TiedLmHead>(mode_, kernels_, split_, embedding_->wte(), config_.vocab_size);

  params_ = embedding_->parameters();
  for (auto& block : blocks_)
    for (const ModelParam& p : block->parameters()) params_.push_back(p);
  for (const ModelParam& p : layernorm_parameters(*ln_f_)) params_.push_back(p);
  for (const ModelParam& p : params_) initialize(p, ctx_.mesh, ctx_.backend, ctx_.seed);
}

std::vector<Parameter*> GptModel::raw_parameters() const {
  std::vector<Parameter*> ps;
  for (const ModelParam& p : params_) ps.push_back(p.param);
  return ps;
}

double GptModel::forward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets) {
  const std::int64_t rows = batch_ * config_.block_size;
  require(static_cast<std::int64_t>(inputs.size()) == rows && static_cast<std::int64_t>(targets.size()) == rows,
          "GPT model: a replica's batch is ", batch_, " sequences of ", config_.block_size, " = ", rows,
          " tokens; got ", inputs.size(), " inputs and ", targets.size(), " targets");
  for (std::span<const std::int32_t> ids : {inputs, targets})
    for (std::int32_t id : ids)
      require(id >= 0 && id < config_.vocab_size, "GPT model: token id ", id, " outside the vocabulary [0, ",
              config_.vocab_size, ")");
  PhaseScope phase(ctx_.mesh.ledger(), "forward");
  Tensor x = embedding_->forward(inputs);
  for (auto& block : blocks_) x = block->forward(x);
  double local = head_->forward(ln_f_->forward(x), targets);
  // Every rank of the vocabulary split holds the same row sums: add over the logits' row split
  // (C) and over the replicas.
  Tensor total = ctx_.backend.from_f64({local}, {1}, DType::f64, MemCategory::other);
  if (split_.col_parts > 1) ctx_.mesh.comm(split_.col_group).all_reduce(total);
  if (dp_size_ > 1) ctx_.mesh.comm(dp_group_).all_reduce(total);
  return ctx_.backend.to_f64(total)[0] / static_cast<double>(rows * dp_size_);
}

double GptModel::loss(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets) {
  return forward(inputs, targets);
}

double GptModel::forward_backward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets) {
  const double mean = forward(inputs, targets);
  const double scale = 1.0 / static_cast<double>(batch_ * config_.block_size * dp_size_);
  PhaseScope phase(ctx_.mesh.ledger(), "backward");
  Tensor dx = ln_f_->backward(head_->backward(scale));
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) dx = (*it)->backward(dx);
  embedding_->backward(dx);
  return mean;
}

void GptModel::reduce_gradients() {
  PhaseScope phase(ctx_.mesh.ledger(), "grad-sync");
  mdtp::reduce_gradients(raw_parameters(), ctx_.mesh, dp_size_ > 1 ? dp_group_ : "");
}

void GptModel::zero_gradients() { mdtp::zero_gradients(raw_parameters(), ctx_.backend); }

}  // namespace mdtp
