#include "cost/parameter_names.hpp"

namespace mdtp::cost {

ParameterNames parameter_names(const ModelShape& m) {
  if (m.family == ModelFamily::gpt2)
    return {"transformer.wte.weight",
            "transformer.wpe.weight",
            "transformer.ln_f",
            m.tied_head ? "" : "lm_head.weight",  // GPT2LMHeadModel's name when tie_word_embeddings is false
            "transformer.h.",
            ".ln_1",
            ".attn.c_attn",
            ".attn.c_proj",
            ".ln_2",
            ".mlp.c_fc",
            ".mlp.c_proj"};
  return {"model.embed_tokens.weight",
          "",
          "model.norm",
          m.tied_head ? "" : "lm_head.weight",
          "model.layers.",
          ".input_layernorm",
          ".self_attn.qkv_proj",
          ".self_attn.o_proj",
          ".post_attention_layernorm",
          ".mlp.gate_up_proj",
          ".mlp.down_proj"};
}

}  // namespace mdtp::cost
