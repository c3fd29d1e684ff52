#include "model/attention.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "mesh/mesh.hpp"
#include "model/fused_columns.hpp"
#include "model/model_split.hpp"
#include "spec/names.hpp"

namespace mdtp {

void require_heads_split(const ModelShape& model, int g, const std::string& where, const char* mode_name) {
  const std::int64_t kv = model.kv();
  require(model.heads % g == 0, where, ": n_head=", model.heads, " must be divisible by the ", g,
          " ranks that split the QKV heads in mode ", mode_name);
  require(kv % g == 0 || g % kv == 0, where, ": num_key_value_heads=", kv, " and the ", g,
          " ranks that split the heads in mode ", mode_name, " must divide one another (each rank holds ",
          "kv/", g, " key/value heads, or each key/value head is held by ", g, "/kv ranks)");
}

CausalSelfAttention::CausalSelfAttention(const TensorParallelMode& mode, const GptKernels& kernels,
                                         const std::string& name, const ModelShape& config, const Layout& input,
                                         std::int64_t batch_per_replica)
    : backend_(mode.context().backend), kernels_(kernels), config_(config) {
  const Mesh& mesh = mode.context().mesh;
  const bool llama = config_.family == ModelFamily::llama;
  const std::int64_t H = config_.hidden, d = H / config_.heads, kv = config_.kv();
  // The g ranks that split the heads: those that split a Linear's output columns, the fastest TP
  // axis in every mode (checked against c_attn's output layout below).
  const int g = mesh.topology().tp_grid().axes().front().size;
  require_heads_split(config_, g, name, mode.name().c_str());
  // Fewer key/value heads than ranks: each rank stores the one K and V head its query heads read,
  // so c_attn is (heads + 2g)·d wide in storage, its K/V columns copies over the tp.kv group.
  const std::int64_t copies = kv_copies_for(kv, g), stored_kv = kv * copies;
  // parameters() gives both Linears their InitSpecs (and c_attn its block-grouped column order)
  // and initialize() draws them once: the Linears only allocate.
  LinearSpec attn_spec{name + (llama ? ".qkv_proj" : ".c_attn"), H, (config_.heads + 2 * stored_kv) * d, !llama};
  attn_spec.draw_initial_values = false;
  c_attn_ = mode.linear(attn_spec, input);
  const Layout& qkv = c_attn_->output_layout();
  require(qkv.col_groups.size() <= 1, name, ": mode ", mode.name(), " splits the QKV columns over ",
          group_list(qkv.col_groups), "; attention needs at most one group");
  require((qkv.col_groups.empty() ? 1 : group_size(mesh, qkv.col_groups.front())) == g, name, ": mode ", mode.name(),
          " splits the QKV columns over ", group_list(qkv.col_groups), ", not the fastest TP axis of ", g, " ranks");
  std::int64_t row_blocks = 1;
  for (const auto& group : qkv.row_groups) row_blocks *= group_size(mesh, group);
  // Not named by the layer: every layer of every stage refuses the same batch alike, so the job
  // prints the one line once instead of one per pipeline stage.
  require(batch_per_replica % row_blocks == 0, "attention needs whole sequences on every rank, but the ",
          "per-replica batch of ", batch_per_replica, " sequences is split over ", row_blocks, " row blocks (",
          group_list(qkv.row_groups), " in layout ", qkv.name, " of mode ", mode.name(),
          "); use a global batch divisible by dp×", row_blocks);
  local_heads_ = config_.heads / g;
  local_kv_heads_ = stored_kv / g;
  logical_qkv_width_ = (config_.heads + 2 * kv) * d;
  qkv_columns_ = block_grouped_columns({config_.heads * d, kv * d, kv * d}, {g, g / copies, g / copies}, g,
                                       name + " QKV");
  if (copies > 1) {
    const Topology& topology = mesh.topology();
    require(mesh.has_comm(group::tp_kv) && mesh.comm(group::tp_kv).size() == copies, name, ": each of the ", kv,
            " key/value heads is held by ", copies, " of the ", g, " ranks splitting the heads, but the mesh has ",
            mesh.has_comm(group::tp_kv) ? "tp.kv groups of " + std::to_string(mesh.comm(group::tp_kv).size()) + " ranks"
                                        : std::string("no tp.kv groups"),
            " (build it with kv_copies=", copies, ": mesh_config does from the model)");
    if (!qkv.col_groups.empty())
      for (int member : topology.group_of(group::tp_kv, mesh.rank())) {
        const auto& own = topology.group_of(qkv.col_groups.front(), mesh.rank());
        require(std::find(own.begin(), own.end(), member) != own.end(), name, ": the tp.kv group of rank ",
                mesh.rank(), " leaves the ", qkv.col_groups.front(), " group that splits the heads");
      }
    require(!attn_spec.bias, name, ": a key/value head held by several ranks needs a model without QKV biases");
    c_attn_->parameters()[0]->replicated_columns =
        ReplicatedColumns{group::tp_kv, local_heads_ * d, 2 * local_kv_heads_ * d};
  }
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
    return {model_param(a[0], weight, true, qkv_columns_, -1, logical_qkv_width_), model_param(p[0], weight, true)};
  // GPT-2: residual projections get std 0.02/sqrt(2·n_layer).
  const InitSpec proj{InitSpec::Kind::normal, 0.02 / std::sqrt(2.0 * static_cast<double>(config_.layers)), 0.0};
  return {model_param(a[0], weight, true, qkv_columns_), model_param(a[1], zero, false, qkv_columns_),
          model_param(p[0], proj, true), model_param(p[1], zero)};
}

}  // namespace mdtp
