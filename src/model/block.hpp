#pragma once
// One GPT-2 pre-LayerNorm transformer block on the residual layout:
//   x = x + attn(ln_1(x));   x = x + mlp(ln_2(x))      (GeLU tanh, LayerNorm eps 1e-5, no dropout)
#include <memory>

#include "model/attention.hpp"
#include "tp/mlp.hpp"

namespace mdtp {

// What one block keeps for one micro-batch.
struct BlockSaved {
  LayerNormSaved ln_1, ln_2;
  AttentionSaved attn;
  MlpSaved mlp;
};

class TransformerBlock {
 public:
  // `name` is the module prefix, "transformer.h.<i>".
  TransformerBlock(const TensorParallelMode& mode, const GptKernels& kernels, const std::string& name,
                   const ModelShape& config, std::int64_t batch_per_replica);
  // keep_probabilities false: selective recomputation of the attention core (attention.hpp).
  Tensor forward(const Tensor& x, BlockSaved& saved, bool keep_probabilities = true);
  // B: the input gradient through the MLP, ln_2, attention and ln_1 (LayerNorm γ/β gradients
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
  std::unique_ptr<Mlp> mlp_;
};

// ModelParams of a LayerNorm: γ = 1, β = 0.
std::vector<ModelParam> layernorm_parameters(LayerNorm& ln);

}  // namespace mdtp
