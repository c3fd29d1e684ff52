#include "model/gpt.hpp"

#include <algorithm>
#include <sstream>

#include "mesh/mesh.hpp"
#include "spec/names.hpp"

namespace mdtp {
namespace {

std::string range_string(const UnitRange& r) {
  std::ostringstream os;  // not chained std::string +: GCC 12 misreports it (-Wrestrict, PR 105329)
  os << '[' << r.first << ", " << r.last << ']';
  return os.str();
}

}  // namespace

void validate_chunks(const std::vector<UnitRange>& chunks, const ModelShape& config) {
  const int last_unit = unit_count(config) - 1;
  require(!chunks.empty(), "a GPT model holds at least one chunk of units");
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const UnitRange& r = chunks[i];
    require(r.first >= 0 && r.first <= r.last && r.last <= last_unit, "chunk ", range_string(r),
            " is not a range of units inside [0, ", last_unit, "] (0 = embedding, 1 … ", config.layers,
            " = blocks, ", last_unit, " = head)");
    if (i > 0)
      require(chunks[i - 1].last < r.first, "chunks ", range_string(chunks[i - 1]), " and ", range_string(r),
              " overlap or are out of order");
  }
}

int unit_of_parameter(const std::string& name, const ModelShape& config) {
  const bool llama = config.family == ModelFamily::llama;
  if (name == word_embedding_name(config) || (!llama && name == "transformer.wpe.weight")) return 0;
  if (name.rfind(llama ? "model.norm." : "transformer.ln_f.", 0) == 0) return unit_count(config) - 1;
  if (name == "lm_head.weight" && !config.tied_head) return unit_count(config) - 1;
  const std::string prefix = llama ? "model.layers." : "transformer.h.";
  if (name.rfind(prefix, 0) != 0) return -1;
  const std::size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size()) return -1;
  int block = 0;
  for (std::size_t i = prefix.size(); i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    block = block * 10 + (name[i] - '0');
    if (block >= config.layers) return -1;
  }
  return block + 1;
}

// ---- ModelChunk ----------------------------------------------------------------------------------

bool ModelChunk::has_head() const { return units_.last == unit_count(model_->config_) - 1; }

Tensor ModelChunk::forward(const Tensor& x, const MicroBatch& mb, ChunkSaved& saved, double* loss_sum) {
  require(!saved.forward_done, "GPT chunk ", range_string(units_),
          ": forward was given the saved state of a micro-batch still in flight; use one ChunkSaved per micro-batch");
  GptModel& m = *model_;
  UnitHooks* hooks = m.hooks_;
  saved.microbatch = mb.index;
  const int L = static_cast<int>(m.config_.layers);
  Tensor h = x;
  if (has_embedding()) {
    m.validate_tokens(mb.inputs, "inputs");
    if (hooks) hooks->before_forward(0, mb.index);
    m.sample_parameters();
    h = m.embedding_->forward(mb.inputs, saved.embedding);
    if (hooks) hooks->after_forward(0, mb.index);
  } else {
    // A stage boundary: the residual stream in the mode's residual layout, this micro-batch's rows.
    const ShardBlock b = shard_block(m.split_.residual, m.ctx_.mesh, m.batch_ * m.config_.seq,
                                     m.config_.hidden, "GPT chunk input");
    require(x.defined() && x.rows() == b.rows && x.cols() == b.cols, "GPT chunk ", range_string(units_),
            ": its input is the residual stream [", b.rows, ", ", b.cols, "] in layout ", m.split_.residual.name,
            "; got ", x.defined() ? shape_string(x.shape()) : std::string("nothing"));
  }
  const int last_block = std::min(units_.last, L);
  const std::size_t block_count = static_cast<std::size_t>(std::max(0, last_block - first_block() + 1));
  saved.blocks.resize(block_count);
  const bool recompute = m.recompute_ == Recompute::full;
  const bool keep_probabilities = m.recompute_ != Recompute::selective;
  if (recompute) saved.block_inputs.resize(block_count);
  m.context_started(saved);
  for (int u = first_block(); u <= last_block; ++u) {
    const std::size_t i = block_slot(u);
    if (hooks) hooks->before_forward(u, mb.index);
    m.sample_parameters();
    if (recompute) {
      // Keep the input only; what the block keeps for backward is dropped with `discarded`.
      saved.block_inputs[i] = h;
      BlockSaved discarded;
      h = m.blocks_[static_cast<std::size_t>(u - 1)]->forward(h, discarded);
    } else {
      h = m.blocks_[static_cast<std::size_t>(u - 1)]->forward(h, saved.blocks[i], keep_probabilities);
    }
    if (hooks) hooks->after_forward(u, mb.index);
  }
  if (has_head()) {
    m.validate_tokens(mb.targets, "targets");
    if (hooks) hooks->before_forward(L + 1, mb.index);
    m.sample_parameters();
    const double sum = m.head_->forward(m.ln_f_->forward(h, saved.ln_f), mb.targets, saved.head);
    if (hooks) hooks->after_forward(L + 1, mb.index);
    if (loss_sum) *loss_sum = sum;
    h = Tensor();
  }
  saved.forward_done = true;
  m.sample_kept();
  return h;
}

Tensor ModelChunk::unit_backward_input(int u, const Tensor& dy, double loss_scale, ChunkSaved& saved) {
  GptModel& m = *model_;
  UnitHooks* hooks = m.hooks_;
  const int L = static_cast<int>(m.config_.layers), mb = saved.microbatch;
  if (hooks) hooks->before_backward_input(u, mb);
  m.sample_parameters();
  Tensor d;
  if (u == L + 1) {
    d = m.ln_f_->backward_input(m.head_->backward_input(loss_scale, saved.head), saved.ln_f);
  } else if (u == 0) {
    m.embedding_->backward_input(dy, saved.embedding);
  } else {
    const std::size_t i = block_slot(u);
    TransformerBlock& block = *m.blocks_[static_cast<std::size_t>(u - 1)];
    if (!saved.block_inputs.empty()) {
      // Full recomputation: the block's forward again (its parameters are in hand: the hook above
      // gathered them under ZeRO-3), refilling its state; its output is not needed.
      PhaseScope phase(m.ctx_.mesh.ledger(), phase::recompute);
      block.forward(saved.block_inputs[i], saved.blocks[i]);
      saved.block_inputs[i] = Tensor();
    }
    d = block.backward_input(dy, saved.blocks[i]);
  }
  if (hooks) hooks->after_backward_input(u, mb);
  return d;
}

void ModelChunk::unit_backward_weight(int u, ChunkSaved& saved, bool last_of_step) {
  GptModel& m = *model_;
  const int L = static_cast<int>(m.config_.layers);
  if (m.hooks_) m.hooks_->before_backward_weight(u, saved.microbatch);
  if (u == L + 1) {
    m.head_->backward_weight(saved.head);
    m.ln_f_->backward_weight(saved.ln_f);
  } else if (u == 0) {
    m.embedding_->backward_weight(saved.embedding);
  } else {
    m.blocks_[static_cast<std::size_t>(u - 1)]->backward_weight(
        saved.blocks[block_slot(u)]);
  }
  if (m.hooks_) {
    m.hooks_->after_backward_weight(u, saved.microbatch);
    if (last_of_step) m.hooks_->grads_ready(u);
  }
}

Tensor ModelChunk::backward_input(const Tensor& dy, double loss_scale, ChunkSaved& saved) {
  require(saved.forward_done && !saved.input_done, "GPT chunk ", range_string(units_),
          saved.forward_done ? ": backward_input called twice for one micro-batch" : ": backward_input before forward");
  Tensor d = dy;
  for (int u = units_.last; u >= units_.first; --u) d = unit_backward_input(u, d, loss_scale, saved);
  saved.input_done = true;
  model_->sample_kept();
  return d;
}

void ModelChunk::backward_weight(ChunkSaved& saved, bool last_of_step) {
  require(saved.input_done, "GPT chunk ", range_string(units_),
          ": backward_weight needs backward_input of the same micro-batch first");
  for (int u = units_.last; u >= units_.first; --u) unit_backward_weight(u, saved, last_of_step);
  model_->context_finished(saved);
  saved = ChunkSaved{};
  model_->sample_kept();
}

Tensor ModelChunk::backward(const Tensor& dy, double loss_scale, ChunkSaved& saved, bool last_of_step) {
  require(saved.forward_done && !saved.input_done, "GPT chunk ", range_string(units_),
          saved.forward_done ? ": backward called twice for one micro-batch" : ": backward before forward");
  // Unit by unit: the same arithmetic as B then W (a unit's weight pass reads only its own saved
  // state, and the tied wte's two contributions keep their order: head first, embedding last),
  // but each unit's gradients are complete right after its own passes.
  Tensor d = dy;
  for (int u = units_.last; u >= units_.first; --u) {
    d = unit_backward_input(u, d, loss_scale, saved);
    unit_backward_weight(u, saved, last_of_step);
  }
  model_->context_finished(saved);
  saved = ChunkSaved{};
  model_->sample_kept();
  return d;
}

std::vector<ModelParam> ModelChunk::parameters() const {
  std::vector<ModelParam> out;
  for (int u = units_.first; u <= units_.last; ++u)
    for (const ModelParam& p : model_->unit_parameters(u)) out.push_back(p);
  return out;
}

// ---- GptModel ------------------------------------------------------------------------------------

GptModel::GptModel(const TensorParallelMode& mode, const ModelShape& config, std::int64_t micro_batch,
                   std::vector<UnitRange> chunks, std::string data_parallel_group, const GptKernels* kernels)
    : mode_(mode), ctx_(mode.context()),
      own_kernels_(kernels ? nullptr : make_host_gpt_kernels(ctx_.backend)),
      kernels_(kernels ? *kernels : *own_kernels_), config_(config), batch_(micro_batch),
      dp_group_(std::move(data_parallel_group)) {
  validate(config_);
  require(batch_ > 0, "GPT model: the per-replica micro-batch must be positive; got ", batch_);
  if (chunks.empty()) chunks = {UnitRange{0, unit_count(config_) - 1}};
  validate_chunks(chunks, config_);
  dp_size_ = group_size(ctx_.mesh, dp_group_);
  split_ = ModelSplit::of(mode_);
  const std::int64_t rows = batch_ * config_.seq;
  require(rows % split_.row_parts == 0 && rows % split_.col_parts == 0, "GPT model: the ", rows,
          " token rows of a replica's micro-batch (", batch_, " sequences × block_size ", config_.seq,
          ") must be divisible by the row split of the residual (", split_.row_parts, ": ", group_list(split_.rows),
          ") and by the logits' row split (", split_.col_parts, ": ", group_list(split_.cols), ") in mode ", mode_.name());
  for (const UnitRange& r : chunks) chunks_.emplace_back(*this, r);

  const int L = static_cast<int>(config_.layers);
  unit_params_.resize(static_cast<std::size_t>(unit_count(config_)));
  if (holds(0)) {
    embedding_ = std::make_unique<GptEmbedding>(mode_, kernels_, split_, config_);
    unit_params_[0] = embedding_->parameters();
  }
  blocks_.resize(static_cast<std::size_t>(L));
  for (int i = 0; i < L; ++i) {
    if (!holds(i + 1)) continue;
    blocks_[static_cast<std::size_t>(i)] = std::make_unique<TransformerBlock>(mode_, kernels_, config_, i, batch_);
    unit_params_[static_cast<std::size_t>(i + 1)] = blocks_[static_cast<std::size_t>(i)]->parameters();
  }
  if (holds(L + 1)) {
    std::vector<ModelParam>& head_params = unit_params_[static_cast<std::size_t>(L + 1)];
    Parameter* weight = nullptr;
    if (config_.tied_head && embedding_) {
      weight = &embedding_->wte();
    } else {
      head_weight_ = std::make_unique<Parameter>(config_.tied_head ? make_word_embedding(mode_, split_, config_)
                                                                   : make_lm_head_weight(mode_, split_, config_));
      weight = head_weight_.get();
    }
    ln_f_ = model_norm(mode_, config_, config_.family == ModelFamily::llama ? "model.norm" : "transformer.ln_f",
                       split_.residual);
    head_ = std::make_unique<TiedLmHead>(mode_, kernels_, split_, *weight, config_.vocab);
    // Hugging Face's order: the final norm, then lm_head.weight (the tied copy keeps its place).
    if (config_.tied_head && head_weight_) head_params.push_back(word_embedding_param(weight, config_));
    for (const ModelParam& p : layernorm_parameters(*ln_f_)) head_params.push_back(p);
    if (!config_.tied_head) head_params.push_back(word_embedding_param(weight, config_));
  }
  for (const auto& unit : unit_params_)
    for (const ModelParam& p : unit) params_.push_back(p);
  // Deferred parameters (TpContext::defer_parameters) have no storage: ZeRO-3 draws the values of
  // each rank's shard (zero/zero_buffers.hpp) with the same initial_values().
  if (!ctx_.defer_parameters)
    for (const ModelParam& p : params_) initialize(p, ctx_.mesh, ctx_.backend, ctx_.seed);
}

bool GptModel::holds(int unit) const {
  for (const ModelChunk& c : chunks_)
    if (c.units().first <= unit && unit <= c.units().last) return true;
  return false;
}

const std::vector<ModelParam>& GptModel::unit_parameters(int unit) const {
  return unit_params_.at(static_cast<std::size_t>(unit));
}

std::vector<Parameter*> GptModel::raw_parameters() const {
  std::vector<Parameter*> ps;
  for (const ModelParam& p : params_) ps.push_back(p.param);
  return ps;
}

void GptModel::validate_tokens(std::span<const std::int32_t> ids, const char* what) const {
  const std::int64_t rows = batch_ * config_.seq;
  require(static_cast<std::int64_t>(ids.size()) == rows, "GPT model: a replica's micro-batch is ", batch_,
          " sequences of ", config_.seq, " = ", rows, " tokens; got ", ids.size(), " ", what);
  for (std::int32_t id : ids)
    require(id >= 0 && id < config_.vocab, "GPT model: token id ", id, " in the ", what,
            " is outside the vocabulary [0, ", config_.vocab, ")");
}

double GptModel::loss_scale(int micro_batches) const {
  require(micro_batches >= 1, "GPT model: a step has at least one micro-batch; got ", micro_batches);
  return 1.0 / static_cast<double>(micro_batches * batch_ * config_.seq * dp_size_);
}

double GptModel::reduce_loss(double local_sum, int micro_batches) const {
  // Every rank of the vocabulary split holds the same row sums: add over the logits' row split
  // (C) and over the replicas.
  Tensor total = ctx_.backend.from_f64({local_sum}, {1}, DType::f64, MemCategory::other);
  if (split_.col_parts > 1) ctx_.mesh.comm(split_.col_group).all_reduce(total);
  if (dp_size_ > 1) ctx_.mesh.comm(dp_group_).all_reduce(total);
  return ctx_.backend.to_f64(total)[0] * loss_scale(micro_batches);
}

void GptModel::reduce_gradients() {
  PhaseScope phase(ctx_.mesh.ledger(), phase::grad_sync);
  mdtp::reduce_gradients(raw_parameters(), ctx_.mesh, ctx_.backend, dp_size_ > 1 ? dp_group_ : "");
}

void GptModel::sum_copies_over(const std::string& group) {
  for (const ModelParam& p : params_) {
    p.param->partial_grad_over.push_back(group);
    p.param->replicated_over.push_back(group);
  }
}

void GptModel::track_kept_activations(bool on) {
  track_kept_ = on;
  live_contexts_.clear();
  kept_sample_ = KeptActivationSample{};
}

void GptModel::context_started(const ChunkSaved& saved) {
  if (track_kept_) live_contexts_.push_back(&saved);
}

void GptModel::context_finished(const ChunkSaved& saved) {
  if (!track_kept_) return;
  std::erase(live_contexts_, &saved);
}

void GptModel::sample_kept() {
  if (!track_kept_) return;
  std::int64_t kept = 0;
  for (const ChunkSaved* c : live_contexts_) kept += held_bytes(*c);
  kept_sample_.kept_peak = std::max(kept_sample_.kept_peak, kept);
  kept_sample_.allocator_peak =
      std::max(kept_sample_.allocator_peak, ctx_.backend.allocator().tracker().current(MemCategory::activations));
  kept_sample_.samples += 1;
}

void GptModel::sample_parameters() {
  if (!track_kept_) return;
  kept_sample_.parameters_in_pass_peak = std::max(kept_sample_.parameters_in_pass_peak,
                                                  ctx_.backend.allocator().tracker().current(MemCategory::parameters));
}

ActivationShapes GptModel::activation_shapes() const {
  ActivationShapes a;
  const Mesh& mesh = ctx_.mesh;
  const std::int64_t tokens = batch_ * config_.seq, H = config_.hidden;
  a.dtype_bytes = static_cast<std::int64_t>(dtype_size(ctx_.dtype));
  a.seq = config_.seq;
  a.tokens = tokens;
  const ShardBlock r = shard_block(split_.residual, mesh, tokens, H, "residual stream");
  a.residual_rows = r.rows;
  a.residual_cols = r.cols;
  // The head: G is the row-gathered final hidden state (ln_f's output itself without a row
  // split); the logits' rows split over C, the vocabulary (padded) over S.
  a.head_gathered_rows = split_.row_parts > 1 ? tokens : r.rows;
  a.logits_rows = tokens / split_.col_parts;
  a.vocab_cols = split_.padded_vocab(config_.vocab) / split_.vocab_parts;
  a.row_parts = split_.row_parts;
  a.col_parts = split_.col_parts;
  a.vocab_parts = split_.vocab_parts;
  for (const auto& block : blocks_) {
    if (!block) continue;
    CausalSelfAttention& attn = block->attention();
    Mlp& mlp = block->mlp();
    const ShardBlock qkv =
        shard_block(attn.c_attn().output_layout(), mesh, tokens, attn.c_attn().spec().out_features, "QKV");
    const ShardBlock core = shard_block(attn.c_proj().input_layout(), mesh, tokens, H, "attention output");
    const ShardBlock fc = shard_block(mlp.fc1().output_layout(), mesh, tokens, mlp.fc1().spec().out_features, "fc1");
    a.qkv_rows = qkv.rows;
    a.qkv_cols = qkv.cols;
    a.core_cols = core.cols;
    a.local_heads = attn.local_heads();
    a.mlp_rows = fc.rows;
    a.mlp_cols = fc.cols;
    // What each Linear's passes allocate beside Y and dX, as the Linear reports it (the mode's
    // gathers of dY, partial products before a reduce-scatter).
    a.linear_allocs = {attn.c_attn().activation_allocs(tokens), attn.c_proj().activation_allocs(tokens),
                       mlp.fc1().activation_allocs(tokens), mlp.fc2().activation_allocs(tokens)};
    break;
  }
  return a;
}

void GptModel::zero_gradients() { mdtp::zero_gradients(raw_parameters(), ctx_.backend); }

}  // namespace mdtp
