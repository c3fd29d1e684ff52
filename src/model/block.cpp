#include "model/block.hpp"

#include <cmath>

namespace mdtp {

std::vector<ModelParam> layernorm_parameters(LayerNorm& ln) {
  std::vector<Parameter*> ps = ln.parameters();
  return {model_param(ps[0], InitSpec{InitSpec::Kind::constant, 0.0, 1.0}),
          model_param(ps[1], InitSpec{InitSpec::Kind::constant, 0.0, 0.0})};
}

TransformerBlock::TransformerBlock(const TensorParallelMode& mode, const GptKernels& kernels, const std::string& name,
                                   const ModelShape& config, std::int64_t batch_per_replica)
    : backend_(mode.context().backend), config_(config) {
  const Layout residual = mode.residual_layout();
  const std::int64_t H = config_.hidden;
  ln_1_ = mode.layernorm(name + ".ln_1", H, residual);
  attn_ = std::make_unique<CausalSelfAttention>(mode, kernels, name + ".attn", config_, residual, batch_per_replica);
  ln_2_ = mode.layernorm(name + ".ln_2", H, residual);
  // parameters() gives the MLP its GPT-2 InitSpecs and initialize() draws them once.
  mlp_ = std::make_unique<Mlp>(mode, name + ".mlp", H, 4 * H, residual, /*draw_initial_values=*/false);
  require_layout(mlp_->output_layout(), residual, name + ".mlp output");
}

Tensor TransformerBlock::forward(const Tensor& x, BlockSaved& saved, bool keep_probabilities) {
  Tensor h = attn_->forward(ln_1_->forward(x, saved.ln_1), saved.attn, keep_probabilities);
  backend_.axpy(1.0, x, h);  // h = x + attn(ln_1(x))
  Tensor out = mlp_->forward(ln_2_->forward(h, saved.ln_2), saved.mlp);
  backend_.axpy(1.0, h, out);
  return out;
}

Tensor TransformerBlock::backward_input(const Tensor& dy, BlockSaved& saved) {
  // d(h) = dy + ln_2ᵀ(mlpᵀ(dy)); d(x) = d(h) + ln_1ᵀ(attnᵀ(d(h))).
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
  const InitSpec proj{InitSpec::Kind::normal, 0.02 / std::sqrt(2.0 * static_cast<double>(config_.layers)), 0.0};
  std::vector<Parameter*> m = mlp_->parameters();  // c_fc.weight, c_fc.bias, c_proj.weight, c_proj.bias
  ps.push_back(model_param(m[0], weight, true));
  ps.push_back(model_param(m[1], zero));
  ps.push_back(model_param(m[2], proj, true));
  ps.push_back(model_param(m[3], zero));
  return ps;
}

}  // namespace mdtp
