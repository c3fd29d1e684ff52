#pragma once
// GptModel: GPT-2 (nanoGPT's architecture and parameter names) written once against the
// TensorParallelMode interface, so every mode runs the same model:
//   x = wte[ids] + wpe[pos];  x = block_i(x) for each layer;  x = ln_f(x);
//   loss = mean cross-entropy(x·wteᵀ, targets)  (LM head tied to wte)
// Data parallelism: each replica (a rank's "dp" group position) gets its own batch_per_replica
// sequences; the loss is the mean over all replicas' tokens and gradients are scaled for it, so
// reduce_gradients() (TP partial sums, then the dp sum) leaves the gradient of that mean.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/block.hpp"
#include "model/embedding.hpp"
#include "model/gpt_kernels.hpp"
#include "model/lm_head.hpp"

namespace mdtp {

class GptModel {
 public:
  // Validates everything (config, divisibility of heads, batch and features by the mode's splits)
  // on every rank before any collective, then builds and initialises the model (GPT-2 init from
  // ctx.seed, by logical index: the same model in every mode and on every mesh).  The mode (with
  // its mesh and backend) must outlive the model.
  // `kernels` (the GPT kernels of the mode's backend, outliving the model) may be null for a host
  // backend: the model then uses its own host kernels.
  GptModel(const TensorParallelMode& mode, const GptConfig& config, std::int64_t batch_per_replica,
           std::string data_parallel_group = "dp", const GptKernels* kernels = nullptr);

  // One forward and backward over this replica's batch (row-major [batch_per_replica, T] token ids
  // and targets, identical on every rank of the replica).  Accumulates (unreduced) gradients and
  // returns the mean loss over every replica's tokens.
  double forward_backward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets);
  // The same mean loss without backward (the layers' saved state is simply replaced next time).
  double loss(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets);
  // Partial TP sums and the data-parallel sum of every gradient.
  void reduce_gradients();
  void zero_gradients();

  const GptConfig& config() const { return config_; }
  const ModelSplit& split() const { return split_; }
  std::int64_t batch_per_replica() const { return batch_; }
  int data_parallel_size() const { return dp_size_; }
  // In nanoGPT state_dict order.
  std::vector<ModelParam>& parameters() { return params_; }
  std::vector<Parameter*> raw_parameters() const;
  const TensorParallelMode& mode() const { return mode_; }

 private:
  double forward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets);
  const TensorParallelMode& mode_;
  TpContext ctx_;
  std::unique_ptr<GptKernels> own_kernels_;  // when none were given
  const GptKernels& kernels_;
  GptConfig config_;
  std::int64_t batch_;
  std::string dp_group_;
  int dp_size_ = 1;
  ModelSplit split_;
  std::unique_ptr<GptEmbedding> embedding_;
  std::vector<std::unique_ptr<TransformerBlock>> blocks_;
  std::unique_ptr<LayerNorm> ln_f_;
  std::unique_ptr<TiedLmHead> head_;
  std::vector<ModelParam> params_;
};

}  // namespace mdtp
