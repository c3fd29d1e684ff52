#include "model/block.hpp"

#include <cmath>

#include "mesh/mesh.hpp"
#include "model/fused_columns.hpp"
#include "model/model_split.hpp"

namespace mdtp {

std::string block_prefix(const ModelShape& config, int block) {
  return (config.family == ModelFamily::llama ? "model.layers." : "transformer.h.") + std::to_string(block);
}

std::unique_ptr<LayerNorm> model_norm(const TensorParallelMode& mode, const ModelShape& config,
                                      const std::string& name, const Layout& layout) {
  const LayerNorm::Kind kind = config.family == ModelFamily::llama ? LayerNorm::Kind::rms : LayerNorm::Kind::layer;
  return mode.layernorm(name, config.hidden, layout, config.norm_eps, kind);
}

std::vector<ModelParam> layernorm_parameters(LayerNorm& ln) {
  std::vector<Parameter*> ps = ln.parameters();
  std::vector<ModelParam> out{model_param(ps[0], InitSpec{InitSpec::Kind::constant, 0.0, 1.0})};
  if (ps.size() > 1) out.push_back(model_param(ps[1], InitSpec{InitSpec::Kind::constant, 0.0, 0.0}));
  return out;
}

TransformerBlock::TransformerBlock(const TensorParallelMode& mode, const GptKernels& kernels, const ModelShape& config,
                                   int index, std::int64_t batch_per_replica)
    : backend_(mode.context().backend), config_(config) {
  const Layout residual = mode.residual_layout();
  const std::string name = block_prefix(config_, index);
  const bool llama = config_.family == ModelFamily::llama;
  ln_1_ = model_norm(mode, config_, name + (llama ? ".input_layernorm" : ".ln_1"), residual);
  attn_ = std::make_unique<CausalSelfAttention>(mode, kernels, name + (llama ? ".self_attn" : ".attn"), config_,
                                                residual, batch_per_replica);
  ln_2_ = model_norm(mode, config_, name + (llama ? ".post_attention_layernorm" : ".ln_2"), residual);
  // parameters() gives the MLP its InitSpecs and initialize() draws them once.
  if (llama) {
    swiglu_ = std::make_unique<SwiGlu>(kernels);
    mlp_ = std::make_unique<Mlp>(mode, name + ".mlp", config_.hidden, config_.ffn(), residual,
                                 /*draw_initial_values=*/false, swiglu_.get(), /*bias=*/false, "gate_up_proj",
                                 "down_proj");
    const Layout& fc1_out = mlp_->fc1().output_layout();
    const int g = fc1_out.col_groups.empty() ? 1 : group_size(mode.context().mesh, fc1_out.col_groups.front());
    gate_up_columns_ = block_grouped_columns({config_.ffn(), config_.ffn()}, g, name + ".mlp gate/up");
  } else {
    mlp_ = std::make_unique<Mlp>(mode, name + ".mlp", config_.hidden, config_.ffn(), residual,
                                 /*draw_initial_values=*/false);
  }
  require_layout(mlp_->output_layout(), residual, name + ".mlp output");
}

Tensor TransformerBlock::forward(const Tensor& x, BlockSaved& saved, bool keep_probabilities) {
  Tensor h = attn_->forward(ln_1_->forward(x, saved.ln_1), saved.attn, keep_probabilities);
  backend_.axpy(1.0, x, h);  // h = x + attn(norm_1(x))
  Tensor out = mlp_->forward(ln_2_->forward(h, saved.ln_2), saved.mlp);
  backend_.axpy(1.0, h, out);
  return out;
}

Tensor TransformerBlock::backward_input(const Tensor& dy, BlockSaved& saved) {
  // d(h) = dy + norm_2ᵀ(mlpᵀ(dy)); d(x) = d(h) + norm_1ᵀ(attnᵀ(d(h))).
  Tensor dh = ln_2_->backward_input(mlp_->backward_input(dy, saved.mlp), saved.ln_2);
  backend_.axpy(1.0, dy, dh);
  Tensor dx = ln_1_->backward_input(attn_->backward_input(dh, saved.attn), saved.ln_1);
  backend_.axpy(1.0, dh, dx);
  return dx;
}

void TransformerBlock::backward_weight(BlockSaved& saved) {
  mlp_->backward_weight(saved.mlp);
  ln_2_->backward_weight(saved.ln_2);
  attn_->backward_weight(saved.attn);
  ln_1_->backward_weight(saved.ln_1);
}

std::vector<ModelParam> TransformerBlock::parameters() {
  std::vector<ModelParam> ps = layernorm_parameters(*ln_1_);
  for (const ModelParam& p : attn_->parameters()) ps.push_back(p);
  for (const ModelParam& p : layernorm_parameters(*ln_2_)) ps.push_back(p);
  const InitSpec weight{InitSpec::Kind::normal, 0.02, 0.0}, zero{InitSpec::Kind::constant, 0.0, 0.0};
  std::vector<Parameter*> m = mlp_->parameters();
  if (config_.family == ModelFamily::llama) {
    // gate_up_proj.weight (block-grouped [gate | up] columns), down_proj.weight; N(0, 0.02) each.
    ps.push_back(model_param(m[0], weight, true, gate_up_columns_));
    ps.push_back(model_param(m[1], weight, true));
    return ps;
  }
  // c_fc.weight, c_fc.bias, c_proj.weight, c_proj.bias; GPT-2's scaled init of the projection.
  const InitSpec proj{InitSpec::Kind::normal, 0.02 / std::sqrt(2.0 * static_cast<double>(config_.layers)), 0.0};
  ps.push_back(model_param(m[0], weight, true));
  ps.push_back(model_param(m[1], zero));
  ps.push_back(model_param(m[2], proj, true));
  ps.push_back(model_param(m[3], zero));
  return ps;
}

}  // namespace mdtp
