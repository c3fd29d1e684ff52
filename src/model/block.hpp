#pragma once
// One pre-norm transformer block on the residual layout:
//   x = x + attn(norm_1(x));   x = x + mlp(norm_2(x))      (no dropout)
//   gpt2:  LayerNorm (ε 1e-5) with β, GeLU (tanh) MLP of 4·H, biases; names transformer.h.<i>.
//          {ln_1, attn, ln_2, mlp.c_fc, mlp.c_proj}
//   llama: RMSNorm, rotary attention with grouped-query heads, SwiGLU MLP of any width with its
//          gate and up projections fused (tp/mlp.hpp), no biases; names model.layers.<i>.
//          {input_layernorm, self_attn, post_attention_layernorm, mlp.gate_up_proj, mlp.down_proj}
#include <memory>

#include "model/attention.hpp"
#include "model/swiglu.hpp"
#include "tp/mlp.hpp"

namespace mdtp {

// What one block keeps for one micro-batch.
struct BlockSaved {
  LayerNormSaved ln_1, ln_2;
  AttentionSaved attn;
  MlpSaved mlp;
};

// The module prefix of block i: "transformer.h.<i>" (gpt2) or "model.layers.<i>" (llama).
std::string block_prefix(const ModelShape& config, int block);

class TransformerBlock {
 public:
  TransformerBlock(const TensorParallelMode& mode, const GptKernels& kernels, const ModelShape& config, int index,
                   std::int64_t batch_per_replica);
  // keep_probabilities false: selective recomputation of the attention core (attention.hpp).
  Tensor forward(const Tensor& x, BlockSaved& saved, bool keep_probabilities = true);
  // B: the input gradient through the MLP, norm_2, attention and norm_1 (the norms' γ/β gradients
  // come with it); W: the MLP's then attention's weight gradients.
  Tensor backward_input(const Tensor& dy, BlockSaved& saved);
  void backward_weight(BlockSaved& saved);
  std::vector<ModelParam> parameters();
  // The layers, for the activation-memory shapes (model/activation_bytes.hpp).
  CausalSelfAttention& attention() { return *attn_; }
  Mlp& mlp() { return *mlp_; }

 private:
  const Backend& backend_;
  ModelShape config_;
  std::unique_ptr<LayerNorm> ln_1_, ln_2_;
  std::unique_ptr<CausalSelfAttention> attn_;
  std::unique_ptr<SwiGlu> swiglu_;  // llama only
  std::unique_ptr<Mlp> mlp_;
  std::vector<std::int64_t> gate_up_columns_;  // llama: storage → logical columns of gate_up_proj
};

// The norm of the model's family (LayerNorm or RMSNorm) with the model's ε.
std::unique_ptr<LayerNorm> model_norm(const TensorParallelMode& mode, const ModelShape& config,
                                      const std::string& name, const Layout& layout);
// ModelParams of a norm: γ = 1 (and β = 0 for LayerNorm).
std::vector<ModelParam> layernorm_parameters(LayerNorm& ln);

}  // namespace mdtp
