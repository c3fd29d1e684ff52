#include "model/attention.hpp"

#include <cmath>

#include "model/model_split.hpp"
#include "mesh/mesh.hpp"

namespace mdtp {

std::vector<std::int64_t> head_grouped_columns(std::int64_t hidden, std::int64_t blocks) {
  require(blocks > 0 && hidden % blocks == 0, "head-grouped QKV: hidden=", hidden, " must be divisible by the ",
          blocks, " column blocks");
  const std::int64_t part = hidden / blocks, block = 3 * part;
  std::vector<std::int64_t> logical(static_cast<std::size_t>(3 * hidden));
  for (std::int64_t s = 0; s < 3 * hidden; ++s) {
    const std::int64_t b = s / block, w = s % block;
    logical[static_cast<std::size_t>(s)] = (w / part) * hidden + b * part + w % part;
  }
  return logical;
}

CausalSelfAttention::CausalSelfAttention(const TensorParallelMode& mode, const GptKernels& kernels,
                                         const std::string& name, const ModelShape& config, const Layout& input,
                                         std::int64_t batch_per_replica)
    : backend_(mode.context().backend), kernels_(kernels), config_(config) {
  const Mesh& mesh = mode.context().mesh;
  const std::int64_t H = config_.hidden;
  // parameters() gives both Linears their GPT-2 InitSpecs (and c_attn its head-grouped column
  // order) and initialize() draws them once: the Linears only allocate.
  LinearSpec attn_spec{name + ".c_attn", H, 3 * H};
  attn_spec.draw_initial_values = false;
  c_attn_ = mode.linear(attn_spec, input);
  const Layout& qkv = c_attn_->output_layout();
  require(qkv.col_groups.size() <= 1, name, ": mode ", mode.name(), " splits the QKV columns over ",
          group_list(qkv.col_groups), "; attention needs at most one group");
  const int g = qkv.col_groups.empty() ? 1 : group_size(mesh, qkv.col_groups.front());
  require(config_.heads % g == 0, name, ": n_head=", config_.heads, " must be divisible by the ", g,
          " ranks of ", group_list(qkv.col_groups), " that split the QKV heads in mode ", mode.name());
  std::int64_t row_blocks = 1;
  for (const auto& group : qkv.row_groups) row_blocks *= group_size(mesh, group);
  require(batch_per_replica % row_blocks == 0, name, ": attention needs whole sequences on every rank, but the ",
          "per-replica batch of ", batch_per_replica, " sequences is split over ", row_blocks, " row blocks (",
          group_list(qkv.row_groups), " in layout ", qkv.name, " of mode ", mode.name(),
          "); use a global batch divisible by dp×", row_blocks);
  local_heads_ = config_.heads / g;
  qkv_columns_ = head_grouped_columns(H, g);
  LinearSpec proj_spec{name + ".c_proj", H, H};
  proj_spec.draw_initial_values = false;
  c_proj_ = mode.linear(proj_spec, qkv);
  require_layout(c_proj_->output_layout(), input, name + ".c_proj output");
}

Tensor CausalSelfAttention::forward(const Tensor& x, AttentionSaved& saved, bool keep_probabilities) {
  saved.qkv = c_attn_->forward(x, saved.c_attn);
  const std::int64_t rows = saved.qkv.rows(), T = config_.seq;
  Tensor y = backend_.empty({rows, saved.qkv.cols() / 3}, saved.qkv.dtype(), MemCategory::activations);
  saved.probs = backend_.empty({rows / T, local_heads_, T, T}, saved.qkv.dtype(), MemCategory::activations);
  kernels_.attention_forward(saved.qkv, T, local_heads_, y, saved.probs);
  if (!keep_probabilities) saved.probs = Tensor();
  return c_proj_->forward(y, saved.c_proj);
}

Tensor CausalSelfAttention::backward_input(const Tensor& dy, AttentionSaved& saved) {
  require(saved.qkv.defined(), "attention: backward called before forward (or twice for one micro-batch)");
  Tensor dattn = c_proj_->backward_input(dy, saved.c_proj);
  if (!saved.probs.defined()) {
    // Selective recomputation: the core's forward again (no communication); its output equals
    // c_proj's kept input and is dropped, only the probabilities are needed.
    const std::int64_t rows = saved.qkv.rows(), T = config_.seq;
    Tensor y = backend_.empty({rows, saved.qkv.cols() / 3}, saved.qkv.dtype(), MemCategory::activations);
    saved.probs = backend_.empty({rows / T, local_heads_, T, T}, saved.qkv.dtype(), MemCategory::activations);
    kernels_.attention_forward(saved.qkv, T, local_heads_, y, saved.probs);
  }
  Tensor dqkv = backend_.empty(saved.qkv.shape(), saved.qkv.dtype(), MemCategory::activations);
  kernels_.attention_backward(dattn, saved.qkv, saved.probs, config_.seq, local_heads_, dqkv);
  saved.qkv = Tensor();
  saved.probs = Tensor();
  return c_attn_->backward_input(dqkv, saved.c_attn);
}

void CausalSelfAttention::backward_weight(AttentionSaved& saved) {
  c_proj_->backward_weight(saved.c_proj);
  c_attn_->backward_weight(saved.c_attn);
}

std::vector<ModelParam> CausalSelfAttention::parameters() {
  const InitSpec weight{InitSpec::Kind::normal, 0.02, 0.0}, zero{InitSpec::Kind::constant, 0.0, 0.0};
  // GPT-2: residual projections get std 0.02/sqrt(2·n_layer).
  const InitSpec proj{InitSpec::Kind::normal, 0.02 / std::sqrt(2.0 * static_cast<double>(config_.layers)), 0.0};
  std::vector<Parameter*> a = c_attn_->parameters(), p = c_proj_->parameters();
  return {model_param(a[0], weight, true, qkv_columns_), model_param(a[1], zero, false, qkv_columns_),
          model_param(p[0], proj, true), model_param(p[1], zero)};
}

}  // namespace mdtp
