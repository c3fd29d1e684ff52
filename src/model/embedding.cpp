#include "model/embedding.hpp"

#include "mesh/mesh.hpp"
#include "tp/linear.hpp"

namespace mdtp {
namespace {

std::vector<std::string> as_list(const std::string& group) {
  return group.empty() ? std::vector<std::string>{} : std::vector<std::string>{group};
}

}  // namespace

std::string word_embedding_name(const ModelShape& config) {
  return config.family == ModelFamily::llama ? "model.embed_tokens.weight" : "transformer.wte.weight";
}

namespace {

// A [V (padded), H] table in the vocabulary split, replicated over the TP axes that split neither.
Parameter vocabulary_table(const TensorParallelMode& mode, const ModelSplit& split, const ModelShape& config,
                           std::string name) {
  std::vector<std::string> used = split.vocab;
  used.insert(used.end(), split.cols.begin(), split.cols.end());
  Parameter p;
  p.name = std::move(name);
  p.full_shape = {split.padded_vocab(config.vocab), config.hidden};
  p.layout = Layout{"gpt.wte", split.vocab, split.cols};
  p.replicated_over = as_list(complement_group(mode.tp_axes(), used));
  p.decays = true;
  return p;
}

}  // namespace

Parameter make_word_embedding(const TensorParallelMode& mode, const ModelSplit& split, const ModelShape& config) {
  Parameter wte = vocabulary_table(mode, split, config, word_embedding_name(config));
  if (config.tied_head) {
    wte.replicated_over.push_back("embedding");
    wte.partial_grad_over = {"embedding"};
  }
  materialize(wte, mode.context(), InitSpec{});
  return wte;
}

Parameter make_lm_head_weight(const TensorParallelMode& mode, const ModelSplit& split, const ModelShape& config) {
  Parameter head = vocabulary_table(mode, split, config, "lm_head.weight");
  materialize(head, mode.context(), InitSpec{});
  return head;
}

ModelParam word_embedding_param(Parameter* wte, const ModelShape& config) {
  return model_param(wte, InitSpec{InitSpec::Kind::normal, 0.02, 0.0}, false, {}, config.vocab);
}

GptEmbedding::GptEmbedding(const TensorParallelMode& mode, const GptKernels& kernels, const ModelSplit& split,
                           const ModelShape& config)
    : ctx_(mode.context()), kernels_(kernels), split_(split), config_(config),
      wte_(make_word_embedding(mode, split, config)) {
  vocab_row0_ = shard_block(wte_.layout, ctx_.mesh, wte_.full_shape[0], wte_.full_shape[1], wte_.name).row0();
  if (config_.family == ModelFamily::llama) return;
  wpe_.name = "transformer.wpe.weight";
  wpe_.full_shape = {config_.seq, config_.hidden};
  wpe_.layout = Layout{"gpt.wpe", {}, split_.cols};
  wpe_.replicated_over = as_list(complement_group(mode.tp_axes(), split_.cols));
  wpe_.partial_grad_over = as_list(split_.row_span);
  wpe_.decays = true;
  materialize(wpe_, ctx_, InitSpec{});
}

std::vector<ModelParam> GptEmbedding::parameters() {
  if (config_.family == ModelFamily::llama) return {word_embedding_param(&wte_, config_)};
  return {word_embedding_param(&wte_, config_), model_param(&wpe_, InitSpec{InitSpec::Kind::normal, 0.02, 0.0})};
}

Tensor GptEmbedding::forward(std::span<const std::int32_t> ids, EmbeddingSaved& saved) {
  require(saved.ids.empty(), "GPT embedding: forward was given the saved state of a micro-batch still in flight");
  const Backend& be = ctx_.backend;
  const Mesh& mesh = ctx_.mesh;
  const auto total = static_cast<std::int64_t>(ids.size());
  const ShardBlock b = shard_block(split_.residual, mesh, total, config_.hidden, "GPT embedding output");
  saved.ids.assign(ids.begin(), ids.end());
  saved.positions.resize(static_cast<std::size_t>(b.rows));
  for (std::int64_t i = 0; i < b.rows; ++i)
    saved.positions[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((b.row0() + i) % config_.seq);

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
  if (config_.family == ModelFamily::llama) return x;
  Tensor pos = be.empty({b.rows, b.cols}, ctx_.dtype, MemCategory::activations);
  kernels_.embedding_forward(wpe_.value, saved.positions, 0, pos);
  be.axpy(1.0, pos, x);
  return x;
}

void GptEmbedding::backward_input(const Tensor& dx, EmbeddingSaved& saved) {
  require(!saved.ids.empty() && !saved.dx.defined(), "GPT embedding: backward_input needs one forward first");
  require(dx.rows() == static_cast<std::int64_t>(saved.positions.size()), "GPT embedding: backward got ", dx.rows(),
          " rows; the forward produced ", saved.positions.size());
  saved.dx = dx;
}

void GptEmbedding::backward_weight(EmbeddingSaved& saved) {
  require(saved.dx.defined(), "GPT embedding: backward_weight needs backward_input of the same micro-batch first");
  const Backend& be = ctx_.backend;
  const Tensor& dx = saved.dx;
  if (config_.family == ModelFamily::gpt2) kernels_.embedding_backward(dx, saved.positions, 0, wpe_.grad);
  Tensor full = dx;
  if (split_.row_parts > 1) {
    full = be.empty({dx.rows() * split_.row_parts, dx.cols()}, dx.dtype(), MemCategory::communication);
    ctx_.mesh.comm(split_.row_span).all_gather(dx, full);
  }
  kernels_.embedding_backward(full, saved.ids, vocab_row0_, wte_.grad);
  saved = EmbeddingSaved{};
}

}  // namespace mdtp
