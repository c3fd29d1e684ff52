#include "cost/model_presets.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace mdtp::cost {

namespace {

ModelShape llama(std::int64_t layers, std::int64_t hidden, std::int64_t heads, std::int64_t kv, std::int64_t ffn,
                 std::int64_t vocab, std::int64_t seq, double theta) {
  ModelShape m;
  m.family = ModelFamily::llama;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = kv;
  m.ffn_hidden = ffn;
  m.vocab = vocab;
  m.seq = seq;
  m.rope_theta = theta;
  m.norm_eps = 1e-5;  // rms_norm_eps of every Llama 2 and Llama 3 config.json
  m.tied_head = false;  // tie_word_embeddings: false
  return m;
}

ModelShape gpt(std::int64_t layers, std::int64_t hidden, std::int64_t heads, std::int64_t seq) {
  ModelShape m;
  m.family = ModelFamily::gpt2;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.seq = seq;
  m.vocab = 50257;  // GPT-2's BPE, which GPT-3 kept
  return m;         // MLP 4·hidden, kv = heads, tied head, LayerNorm ε 1e-5
}

// Llama 2's paper (Touvron et al. 2023, §2.2): 4M tokens per step, for every size; Meta gives no
// other figure for Llama 3's 8B and 70B, so the same 4M tokens are used at their 8192-token context.
constexpr std::int64_t kLlamaTokens = 4 * 1024 * 1024;
const char* const kLlama2Batch = "Touvron et al. 2023: 4M tokens per step";
const char* const kLlama3Batch = "Llama 2's 4M tokens per step (Meta publishes none for these sizes)";

std::vector<ModelPreset> build() {
  std::vector<ModelPreset> p;
  //                               layers hidden heads kv  ffn    vocab   seq   rope θ
  p.push_back({"llama2-7b", llama(32, 4096, 32, 32, 11008, 32000, 4096, 10000), kLlamaTokens / 4096,
               kLlama2Batch});
  p.push_back({"llama2-13b", llama(40, 5120, 40, 40, 13824, 32000, 4096, 10000), kLlamaTokens / 4096,
               kLlama2Batch});
  p.push_back({"llama2-70b", llama(80, 8192, 64, 8, 28672, 32000, 4096, 10000), kLlamaTokens / 4096,
               kLlama2Batch});
  p.push_back({"llama3-8b", llama(32, 4096, 32, 8, 14336, 128256, 8192, 500000), kLlamaTokens / 8192,
               kLlama3Batch});
  p.push_back({"llama3-70b", llama(80, 8192, 64, 8, 28672, 128256, 8192, 500000), kLlamaTokens / 8192,
               kLlama3Batch});
  // Brown et al. 2020, Table 2.1: 96 layers, d_model 12288, 96 heads, context 2048, 3.2M tokens per
  // step (1536 sequences of 2048).
  p.push_back({"gpt3-175b", gpt(96, 12288, 96, 2048), 1536, "Brown et al. 2020: 3.2M tokens per step"});
  // Radford et al. 2019: 1024-token context, 512 sequences per step.
  const char* const gpt2_batch = "Radford et al. 2019: 512 sequences per step";
  p.push_back({"gpt2-small", gpt(12, 768, 12, 1024), 512, gpt2_batch});
  p.push_back({"gpt2-medium", gpt(24, 1024, 16, 1024), 512, gpt2_batch});
  p.push_back({"gpt2-large", gpt(36, 1280, 20, 1024), 512, gpt2_batch});
  p.push_back({"gpt2-xl", gpt(48, 1600, 25, 1024), 512, gpt2_batch});
  return p;
}

}  // namespace

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = build();
  return presets;
}

std::string model_preset_names() {
  std::string out;
  for (const ModelPreset& p : model_presets()) out += (out.empty() ? "" : ", ") + p.name;
  return out;
}

const std::vector<std::pair<std::string, std::string>>& model_preset_aliases() {
  // Llama 2's 7B and 13B match the first generation's shapes but for the 4096 context; its 70B has
  // no first-generation twin.
  static const std::vector<std::pair<std::string, std::string>> aliases = {
      {"llama-7b", "llama2-7b"}, {"llama-13b", "llama2-13b"}, {"llama-70b", "llama2-70b"}};
  return aliases;
}

const ModelPreset& find_model_preset(std::string_view name) {
  for (const auto& [alias, preset] : model_preset_aliases())
    if (alias == name) name = preset;
  for (const ModelPreset& p : model_presets())
    if (p.name == name) return p;
  throw_error("unknown model preset '", name, "'; expected one of ", model_preset_names());
}

void apply_model_preset(RunSpec& spec, const ModelPreset& preset, const std::function<bool(const std::string&)>& given) {
  const ModelShape& from = preset.model;
  ModelShape& m = spec.model;
  auto take = [&](const char* flag, auto member) {
    if (!given(flag)) m.*member = from.*member;
  };
  take("--model", &ModelShape::family);
  take("--layers", &ModelShape::layers);
  take("--hidden", &ModelShape::hidden);
  take("--heads", &ModelShape::heads);
  take("--seq", &ModelShape::seq);
  take("--vocab", &ModelShape::vocab);
  take("--ffn-hidden", &ModelShape::ffn_hidden);
  take("--kv-heads", &ModelShape::kv_heads);
  take("--rope-theta", &ModelShape::rope_theta);
  take("--norm-eps", &ModelShape::norm_eps);
  // --tie-embeddings / --untie-embeddings override the preset's head; --model (without them) gives
  // the family's own choice.
  if (!given("--tie-embeddings") && !given("--untie-embeddings") && !given("--model")) m.tied_head = from.tied_head;
  if (!given("--global-batch")) spec.global_batch = preset.global_batch;
}

std::string describe_preset(const ModelPreset& preset, const RunSpec& spec) {
  const ModelShape& m = spec.model;
  return fmt::format("preset {}: {} l={} h={} a={} kv={} ffn={} s={} V={}, {} head; global batch {} sequences ({} "
                     "tokens{})",
                     preset.name, m.family == ModelFamily::llama ? "Llama" : "GPT", m.layers, m.hidden, m.heads, m.kv(),
                     m.ffn(), m.seq, m.vocab, m.tied_head ? "tied" : "untied", spec.global_batch,
                     spec.global_batch * m.seq,
                     spec.global_batch == preset.global_batch ? "; " + preset.batch_source : ", as given");
}

}  // namespace mdtp::cost
