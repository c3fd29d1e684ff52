#pragma once
// Named models for `mdtp cost` and `mdtp plan` (--preset NAME): the published configurations, so a
// plan for "Llama 2 70B" prices the network Meta released rather than a hand-typed approximation.
// The sizes are the released config.json's (Hugging Face: hidden_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, intermediate_size, vocab_size,
// max_position_embeddings, rope_theta, rms_norm_eps, tie_word_embeddings) or, for GPT-2 and GPT-3,
// the papers' tables; the global batch is the paper's tokens per step over the sequence length.
// Explicit flags override a preset member by member (apply_model_preset).
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "spec/run_spec.hpp"

namespace mdtp::cost {

struct ModelPreset {
  std::string name;
  ModelShape model;
  std::int64_t global_batch = 0;  // sequences per step
  std::string batch_source;       // where that batch comes from
};

// Every preset, in the order `--help` lists them.
const std::vector<ModelPreset>& model_presets();
// The preset of that name; an mdtp::Error listing the names for an unknown one.
const ModelPreset& find_model_preset(std::string_view name);
// "llama2-7b, llama2-13b, ..."
std::string model_preset_names();
// Short names people write for the Llama sizes that exist in one generation only ("llama-70b":
// there is no first-generation 70B), each with the preset it stands for; find_model_preset takes them.
const std::vector<std::pair<std::string, std::string>>& model_preset_aliases();

// Sets every member of `spec` the preset names (the model's shape and family, the global batch)
// whose command-line flag was not given: given("--hidden") true keeps spec.model.hidden as the flags
// set it.
void apply_model_preset(RunSpec& spec, const ModelPreset& preset, const std::function<bool(const std::string&)>& given);

// One line for the command's output: "preset llama2-70b: Llama l=80 h=8192 a=64 kv=8 ffn=28672
// s=4096 V=32000, untied; global batch 1024 sequences (4194304 tokens: ...)".
std::string describe_preset(const ModelPreset& preset, const RunSpec& spec);

}  // namespace mdtp::cost
