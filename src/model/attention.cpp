#include "model/attention.hpp"

#include <cmath>

#include "mesh/mesh.hpp"
#include "model/fused_columns.hpp"
#include "model/model_split.hpp"

namespace mdtp {

CausalSelfAttention::CausalSelfAttention(const TensorParallelMode& mode, const GptKernels& kernels,
                                         const std::string& name, const ModelShape& config, const Layout& input,
                                         std::int64_t batch_per_replica)
    : backend_(mode.context().backend), kernels_(kernels), config_(config) {
  const Mesh& mesh = mode.context().mesh;
  const bool llama = config_.family == ModelFamily::llama;
  const std::int64_t H = config_.hidden, d = H / config_.heads, kv = config_.kv();
  // parameters() gives both Linears their InitSpecs (and c_attn its block-grouped column order)
  // and initialize() draws them once: the Linears only allocate.
  LinearSpec attn_spec{name + (llama ? ".qkv_proj" : ".c_attn"), H, (config_.heads + 2 * kv) * d, !llama};
  attn_spec.draw_initial_values = false;
  c_attn_ = mode.linear(attn_spec, input);
  const Layout& qkv = c_attn_->output_layout();
  require(qkv.col_groups.size() <= 1, name, ": mode ", mode.name(), " splits the QKV columns over ",
          group_list(qkv.col_groups), "; attention needs at most one group");
  const int g = qkv.col_groups.empty() ? 1 : group_size(mesh, qkv.col_groups.front());
  require(config_.heads % g == 0, name, ": n_head=", config_.heads, " must be divisible by the ", g,
          " ranks of ", group_list(qkv.col_groups), " that split the QKV heads in mode ", mode.name());
  require(kv % g == 0, name, ": num_key_value_heads=", kv, " must be divisible by the ", g, " ranks of ",
          group_list(qkv.col_groups), " that split the heads in mode ", mode.name(),
          " (replicating a key/value head over ", g, "/", kv, " ranks is not supported yet)");
  std::int64_t row_blocks = 1;
  for (const auto& group : qkv.row_groups) row_blocks *= group_size(mesh, group);
  require(batch_per_replica % row_blocks == 0, name, ": attention needs whole sequences on every rank, but the ",
          "per-replica batch of ", batch_per_replica, " sequences is split over ", row_blocks, " row blocks (",
          group_list(qkv.row_groups), " in layout ", qkv.name, " of mode ", mode.name(),
          "); use a global batch divisible by dp×", row_blocks);
  local_heads_ = config_.heads / g;
  local_kv_heads_ = kv / g;
  qkv_columns_ = block_grouped_columns({config_.heads * d, kv * d, kv * d}, g, name + " QKV");
  LinearSpec proj_spec{name + (llama ? ".o_proj" : ".c_proj"), H, H, !llama};
  proj_spec.draw_initial_values = false;
  c_proj_ = mode.linear(proj_spec, qkv);
  require_layout(c_proj_->output_layout(), input, name + ".c_proj output");
}

Tensor CausalSelfAttention::core_forward(AttentionSaved& saved) {
  const std::int64_t rows = saved.qkv.rows(), T = config_.seq, d = config_.hidden / config_.heads;
  Tensor y = backend_.empty({rows, local_heads_ * d}, saved.qkv.dtype(), MemCategory::activations);
  saved.probs = backend_.empty({rows / T, local_heads_, T, T}, saved.qkv.dtype(), MemCategory::activations);
  kernels_.attention_forward(saved.qkv, T, local_heads_, y, saved.probs);
  return y;
}

Tensor CausalSelfAttention::forward(const Tensor& x, AttentionSaved& saved, bool keep_probabilities) {
  saved.qkv = c_attn_->forward(x, saved.c_attn);
  if (config_.family == ModelFamily::llama)
    kernels_.rope(saved.qkv, config_.seq, local_heads_, local_kv_heads_, config_.rope_theta, /*inverse=*/false);
  Tensor y = core_forward(saved);
  if (!keep_probabilities) saved.probs = Tensor();
  return c_proj_->forward(y, saved.c_proj);
}

Tensor CausalSelfAttention::backward_input(const Tensor& dy, AttentionSaved& saved) {
  require(saved.qkv.defined(), "attention: backward called before forward (or twice for one micro-batch)");
  Tensor dattn = c_proj_->backward_input(dy, saved.c_proj);
  // Selective recomputation: the core's forward again (no communication); its output equals
  // c_proj's kept input and is dropped, only the probabilities are needed.
  if (!saved.probs.defined()) (void)core_forward(saved);
  Tensor dqkv = backend_.empty(saved.qkv.shape(), saved.qkv.dtype(), MemCategory::activations);
  kernels_.attention_backward(dattn, saved.qkv, saved.probs, config_.seq, local_heads_, dqkv);
  // The rotation is orthogonal: the gradient of the unrotated Q and K is the gradient of the
  // rotated ones turned back.
  if (config_.family == ModelFamily::llama)
    kernels_.rope(dqkv, config_.seq, local_heads_, local_kv_heads_, config_.rope_theta, /*inverse=*/true);
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
  std::vector<Parameter*> a = c_attn_->parameters(), p = c_proj_->parameters();
  if (config_.family == ModelFamily::llama)  // Hugging Face's Llama init: every weight N(0, 0.02)
    return {model_param(a[0], weight, true, qkv_columns_), model_param(p[0], weight, true)};
  // GPT-2: residual projections get std 0.02/sqrt(2·n_layer).
  const InitSpec proj{InitSpec::Kind::normal, 0.02 / std::sqrt(2.0 * static_cast<double>(config_.layers)), 0.0};
  return {model_param(a[0], weight, true, qkv_columns_), model_param(a[1], zero, false, qkv_columns_),
          model_param(p[0], proj, true), model_param(p[1], zero)};
}

}  // namespace mdtp
