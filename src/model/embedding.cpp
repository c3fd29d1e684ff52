#include "model/embedding.hpp"

#include "mesh/mesh.hpp"
#include "tp/linear.hpp"

namespace mdtp {
namespace {

std::vector<std::string> as_list(const std::string& group) {
  return group.empty() ? std::vector<std::string>{} : std::vector<std::string>{group};
}

}  // namespace

GptEmbedding::GptEmbedding(const TensorParallelMode& mode, const GptKernels& kernels, const ModelSplit& split,
                           const GptConfig& config)
    : ctx_(mode.context()), kernels_(kernels), split_(split), config_(config) {
  std::vector<std::string> used = split_.vocab;
  used.insert(used.end(), split_.cols.begin(), split_.cols.end());
  wte_.name = "transformer.wte.weight";
  wte_.full_shape = {split_.padded_vocab(config_.vocab_size), config_.n_embd};
  wte_.layout = Layout{"gpt.wte", split_.vocab, split_.cols};
  wte_.replicated_over = as_list(complement_group(mode.tp_axes(), used));
  wte_.decays = true;
  wpe_.name = "transformer.wpe.weight";
  wpe_.full_shape = {config_.block_size, config_.n_embd};
  wpe_.layout = Layout{"gpt.wpe", {}, split_.cols};
  wpe_.replicated_over = as_list(complement_group(mode.tp_axes(), split_.cols));
  wpe_.partial_grad_over = as_list(split_.row_span);
  wpe_.decays = true;
  for (Parameter* p : {&wte_, &wpe_}) materialize(*p, ctx_.mesh, ctx_.backend, ctx_.dtype, ctx_.seed, InitSpec{});
  vocab_row0_ = shard_block(wte_.layout, ctx_.mesh, wte_.full_shape[0], wte_.full_shape[1], wte_.name).row0();
}

std::vector<ModelParam> GptEmbedding::parameters() {
  const InitSpec normal{InitSpec::Kind::normal, 0.02, 0.0};
  return {model_param(&wte_, normal, false, {}, config_.vocab_size), model_param(&wpe_, normal)};
}

Tensor GptEmbedding::forward(std::span<const std::int32_t> ids) {
  const Backend& be = ctx_.backend;
  const Mesh& mesh = ctx_.mesh;
  const auto total = static_cast<std::int64_t>(ids.size());
  const ShardBlock b = shard_block(split_.residual, mesh, total, config_.n_embd, "GPT embedding output");
  ids_.assign(ids.begin(), ids.end());
  positions_.resize(static_cast<std::size_t>(b.rows));
  for (std::int64_t i = 0; i < b.rows; ++i)
    positions_[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((b.row0() + i) % config_.block_size);

  Tensor partial = be.empty({total, b.cols}, ctx_.dtype, MemCategory::activations);
  kernels_.embedding_forward(wte_.value, ids, vocab_row0_, partial);
  Tensor x = partial;
  if (split_.vocab_parts > 1) {
    if (split_.row_parts > 1) {
      x = be.empty({b.rows, b.cols}, ctx_.dtype, MemCategory::activations);
      mesh.comm(split_.row_span).reduce_scatter(partial, x);
    } else {
      mesh.comm(split_.vocab_span).all_reduce(partial);
    }
  }
  Tensor pos = be.empty({b.rows, b.cols}, ctx_.dtype, MemCategory::activations);
  kernels_.embedding_forward(wpe_.value, positions_, 0, pos);
  be.axpy(1.0, pos, x);
  return x;
}

void GptEmbedding::backward(const Tensor& dx) {
  require(dx.rows() == static_cast<std::int64_t>(positions_.size()), "GPT embedding: backward got ", dx.rows(),
          " rows; the forward produced ", positions_.size());
  const Backend& be = ctx_.backend;
  kernels_.embedding_backward(dx, positions_, 0, wpe_.grad);
  Tensor full = dx;
  if (split_.row_parts > 1) {
    full = be.empty({dx.rows() * split_.row_parts, dx.cols()}, dx.dtype(), MemCategory::communication);
    ctx_.mesh.comm(split_.row_span).all_gather(dx, full);
  }
  kernels_.embedding_backward(full, ids_, vocab_row0_, wte_.grad);
}

}  // namespace mdtp
