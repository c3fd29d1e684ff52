#pragma once
// The names the model gives its parameters, per block family, as model/embedding.cpp, block.cpp,
// attention.cpp and gpt.cpp write them (the cost layer sits beside the model, not above it, so it
// keeps its own copy of the table; tests/step_comm holds the two equal, parameter by parameter):
//
//                 gpt2 (nanoGPT)            llama (Hugging Face)
//   embedding     transformer.wte.weight    model.embed_tokens.weight
//   positions     transformer.wpe.weight    — (rotary: no table)
//   block i       transformer.h.<i>         model.layers.<i>
//     norm 1      .ln_1                     .input_layernorm
//     attention   .attn.c_attn, .attn.c_proj   .self_attn.qkv_proj, .self_attn.o_proj
//     norm 2      .ln_2                     .post_attention_layernorm
//     MLP         .mlp.c_fc, .mlp.c_proj    .mlp.gate_up_proj, .mlp.down_proj
//   final norm    transformer.ln_f          model.norm
//   LM head       lm_head.weight            lm_head.weight
//                 (either: only when untied; a tied head is the embedding's transpose, GPT-2's default)
#include <string>

#include "spec/run_spec.hpp"

namespace mdtp::cost {

struct ParameterNames {
  std::string word_embedding;
  std::string position_embedding;  // "" without a position table
  std::string final_norm;          // a module: ".weight" (and ".bias") follow
  std::string lm_head;             // "" when the head is the embedding's transpose
  std::string block_prefix;        // the block index follows
  // Modules of a block, after "<block_prefix><i>", in the order the block lists them.
  std::string norm_1, attention_in, attention_out, norm_2, mlp_in, mlp_out;

  std::string block(int index) const { return block_prefix + std::to_string(index); }
};

ParameterNames parameter_names(const ModelShape& model);

}  // namespace mdtp::cost
