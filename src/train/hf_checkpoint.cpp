#include "train/hf_checkpoint.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "io/atomic_file.hpp"
#include "io/output_path.hpp"
#include "io/safetensors.hpp"
#include "model/checkpoint_pieces.hpp"
#include "model/embedding.hpp"
#include "model/gpt_config.hpp"
#include "plan/bucket_plan.hpp"  // optimizer_state_dtype
#include "run/root_task.hpp"
#include "train/stage_gather.hpp"

namespace mdtp {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// One tensor of GPT2LMHeadModel's state dict: its key (with the transformer. prefix, which is also
// mdtp's parameter name) and its shape in the file.  The Conv1D weights are [in, out] there and
// mdtp's checkpoint layout is their transpose.
struct HfTensor {
  std::string name;
  Shape shape;
  bool conv1d = false;

  Shape mdtp_shape() const { return conv1d ? Shape{shape[1], shape[0]} : shape; }
};

// Every tensor of the model in state-dict order, without a tied lm_head.weight (which
// save_pretrained leaves out too); an untied head's lm_head.weight [V, H] (a Linear) last.
std::vector<HfTensor> gpt2_tensors(const ModelShape& m) {
  const std::int64_t H = m.hidden, F = m.ffn();
  std::vector<HfTensor> out{{"transformer.wte.weight", {m.vocab, H}}, {"transformer.wpe.weight", {m.seq, H}}};
  for (std::int64_t i = 0; i < m.layers; ++i) {
    const std::string b = "transformer.h." + std::to_string(i) + ".";
    out.insert(out.end(), {{b + "ln_1.weight", {H}},
                           {b + "ln_1.bias", {H}},
                           {b + "attn.c_attn.weight", {H, 3 * H}, true},
                           {b + "attn.c_attn.bias", {3 * H}},
                           {b + "attn.c_proj.weight", {H, H}, true},
                           {b + "attn.c_proj.bias", {H}},
                           {b + "ln_2.weight", {H}},
                           {b + "ln_2.bias", {H}},
                           {b + "mlp.c_fc.weight", {H, F}, true},
                           {b + "mlp.c_fc.bias", {F}},
                           {b + "mlp.c_proj.weight", {F, H}, true},
                           {b + "mlp.c_proj.bias", {H}}});
  }
  out.insert(out.end(), {{"transformer.ln_f.weight", {H}}, {"transformer.ln_f.bias", {H}}});
  if (!m.tied_head) out.push_back({"lm_head.weight", {m.vocab, H}});
  return out;
}

// LlamaForCausalLM's state dict in its order: Linear weights [out, in] as mdtp keeps them, the
// fused qkv_proj and gate_up_proj apart (model/checkpoint_pieces.hpp), lm_head.weight when untied.
std::vector<HfTensor> llama_tensors(const ModelShape& m) {
  const std::int64_t H = m.hidden, F = m.ffn(), d = m.hidden / m.heads, q = m.heads * d, kv = m.kv() * d;
  std::vector<HfTensor> out{{"model.embed_tokens.weight", {m.vocab, H}}};
  for (std::int64_t i = 0; i < m.layers; ++i) {
    const std::string b = "model.layers." + std::to_string(i) + ".";
    out.insert(out.end(), {{b + "self_attn.q_proj.weight", {q, H}},
                           {b + "self_attn.k_proj.weight", {kv, H}},
                           {b + "self_attn.v_proj.weight", {kv, H}},
                           {b + "self_attn.o_proj.weight", {H, q}},
                           {b + "mlp.gate_proj.weight", {F, H}},
                           {b + "mlp.up_proj.weight", {F, H}},
                           {b + "mlp.down_proj.weight", {H, F}},
                           {b + "input_layernorm.weight", {H}},
                           {b + "post_attention_layernorm.weight", {H}}});
  }
  out.push_back({"model.norm.weight", {H}});
  if (!m.tied_head) out.push_back({"lm_head.weight", {m.vocab, H}});
  return out;
}

bool is_llama(const ModelShape& m) { return m.family == ModelFamily::llama; }

std::vector<HfTensor> hf_tensors(const ModelShape& m) { return is_llama(m) ? llama_tensors(m) : gpt2_tensors(m); }

const char* hf_model_name(const ModelShape& m) { return is_llama(m) ? "Llama" : "GPT-2"; }

// The prefix of the base model's keys in the *ForCausalLM state dict, absent from the bare model's.
std::string base_prefix(const ModelShape& m) { return is_llama(m) ? "model." : "transformer."; }

const HfTensor& tensor_named(const std::vector<HfTensor>& tensors, const std::string& name, const ModelShape& m) {
  for (const HfTensor& t : tensors)
    if (t.name == name) return t;
  throw Error("parameter '" + name + "' is not a tensor of Hugging Face's " + hf_model_name(m) + " state dict");
}


// A rows × cols matrix, row-major, as its cols × rows transpose.
std::vector<double> transposed(const std::vector<double>& values, std::int64_t rows, std::int64_t cols) {
  std::vector<double> out(values.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) out[static_cast<std::size_t>(c * rows + r)] = values[static_cast<std::size_t>(r * cols + c)];
  return out;
}

std::string config_path(const std::string& checkpoint) {
  return (fs::path(checkpoint).parent_path() / "config.json").string();
}

// Everything config.json says about the model (GPT-2's files carry no ε or MLP width of their own).
bool same_model(const ModelShape& a, const ModelShape& b) {
  const bool sizes =
      a.vocab == b.vocab && a.layers == b.layers && a.heads == b.heads && a.hidden == b.hidden && a.seq == b.seq;
  if (!sizes || a.family != b.family) return false;
  if (!is_llama(a)) return a.tied_head == b.tied_head;
  return a.ffn() == b.ffn() && a.kv() == b.kv() && a.tied_head == b.tied_head && a.rope_theta == b.rope_theta &&
         a.norm_eps == b.norm_eps;
}

// The config.json transformers writes for this GPT-2 (its names and defaults), in the dtype the
// weights are stored in.
json hf_config(const ModelShape& m, DType storage) {
  if (is_llama(m))
    // LlamaConfig's names; max_position_embeddings is the training sequence (the rotary embedding
    // has no table of its own to bound it).
    return json{{"architectures", {"LlamaForCausalLM"}},
                {"model_type", "llama"},
                {"vocab_size", m.vocab},
                {"hidden_size", m.hidden},
                {"intermediate_size", m.ffn()},
                {"num_hidden_layers", m.layers},
                {"num_attention_heads", m.heads},
                {"num_key_value_heads", m.kv()},
                {"head_dim", m.hidden / m.heads},
                {"hidden_act", "silu"},
                {"max_position_embeddings", m.seq},
                {"rms_norm_eps", m.norm_eps},
                {"rope_theta", m.rope_theta},
                {"rope_scaling", nullptr},
                {"attention_bias", false},
                {"attention_dropout", 0.0},
                {"mlp_bias", false},
                {"pretraining_tp", 1},
                {"initializer_range", 0.02},
                {"tie_word_embeddings", m.tied_head},
                {"torch_dtype", storage == DType::f64 ? "float64" : "float32"}};
  return json{{"architectures", {"GPT2LMHeadModel"}},
              {"model_type", "gpt2"},
              {"vocab_size", m.vocab},
              {"n_positions", m.seq},
              {"n_ctx", m.seq},
              {"n_embd", m.hidden},
              {"n_layer", m.layers},
              {"n_head", m.heads},
              {"n_inner", nullptr},
              {"activation_function", "gelu_new"},
              {"layer_norm_epsilon", 1e-5},
              {"resid_pdrop", 0.0},
              {"embd_pdrop", 0.0},
              {"attn_pdrop", 0.0},
              {"initializer_range", 0.02},
              {"scale_attn_weights", true},
              {"scale_attn_by_inverse_layer_idx", false},
              {"reorder_and_upcast_attn", false},
              {"tie_word_embeddings", m.tied_head},
              {"torch_dtype", storage == DType::f64 ? "float64" : "float32"}};
}

// Typed reads of config.json's fields, each refusal one line naming the file and the field.
struct ConfigReader {
  const json& c;
  std::string where;

  std::optional<std::int64_t> integer(const char* key) const {
    if (!c.contains(key) || c[key].is_null()) return std::nullopt;
    require(c[key].is_number_integer() && c[key].get<std::int64_t>() > 0, where, key, " ", c[key].dump(),
            ": expected a positive integer");
    return c[key].get<std::int64_t>();
  }
  std::int64_t needed(const char* key, const char* expected) const {
    const auto v = integer(key);
    require(v.has_value(), where, "no ", key, " (expected ", expected, ")");
    return *v;
  }
  std::optional<double> number(const char* key) const {
    if (!c.contains(key) || c[key].is_null()) return std::nullopt;
    require(c[key].is_number() && c[key].get<double>() > 0, where, key, " ", c[key].dump(),
            ": expected a positive number");
    return c[key].get<double>();
  }
  bool flag(const char* key, bool fallback) const {
    if (!c.contains(key) || c[key].is_null()) return fallback;
    require(c[key].is_boolean(), where, key, " ", c[key].dump(), ": expected true or false");
    return c[key].get<bool>();
  }
};

// LlamaConfig's fields (transformers' names and defaults); what mdtp's Llama block does not
// implement is refused by name.
ModelShape read_llama_config(const ConfigReader& r) {
  const char* expected = "vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, "
                         "max_position_embeddings";
  ModelShape m;
  m.family = ModelFamily::llama;
  m.vocab = r.needed("vocab_size", expected);
  m.hidden = r.needed("hidden_size", expected);
  m.ffn_hidden = r.needed("intermediate_size", expected);
  m.layers = r.needed("num_hidden_layers", expected);
  m.heads = r.needed("num_attention_heads", expected);
  m.kv_heads = r.integer("num_key_value_heads").value_or(m.heads);
  m.seq = r.needed("max_position_embeddings", expected);
  m.norm_eps = r.number("rms_norm_eps").value_or(1e-6);
  m.rope_theta = r.number("rope_theta").value_or(10000.0);
  m.tied_head = r.flag("tie_word_embeddings", false);
  require(m.heads % m.kv() == 0, r.where, "num_key_value_heads ", m.kv(), " must divide num_attention_heads ", m.heads);
  if (const auto head_dim = r.integer("head_dim"))
    require(*head_dim * m.heads == m.hidden, r.where, "head_dim ", *head_dim,
            " is not implemented: mdtp's Llama has head_dim = hidden_size / num_attention_heads = ", m.hidden / m.heads);
  if (r.c.contains("rope_scaling"))
    require(r.c["rope_scaling"].is_null(), r.where, "rope_scaling ", r.c["rope_scaling"].dump(),
            " is not implemented: mdtp's rotary embedding is unscaled");
  require(!r.flag("attention_bias", false), r.where, "attention_bias true is not implemented: mdtp's Llama has no biases");
  require(!r.flag("mlp_bias", false), r.where, "mlp_bias true is not implemented: mdtp's Llama has no biases");
  if (r.c.contains("hidden_act"))
    require(r.c["hidden_act"] == "silu", r.where, "hidden_act ", r.c["hidden_act"].dump(),
            " is not implemented: mdtp's Llama MLP is SwiGLU (silu)");
  if (const auto tp = r.integer("pretraining_tp"))
    require(*tp == 1, r.where, "pretraining_tp ", *tp, " is not implemented: expected 1");
  return m;
}

}  // namespace

bool is_hf_checkpoint(const std::string& path) { return path.ends_with(".safetensors") || path.ends_with(".json"); }

bool is_attention_mask_buffer(const std::string& key) {
  return key.ends_with(".attn.bias") || key.ends_with(".attn.masked_bias");
}

ModelShape read_hf_config(const std::string& path) {
  const std::string file = config_path(path);
  std::ifstream in(file);
  require(in.good(), "Hugging Face checkpoint '", path, "' has no config.json beside it ('", file,
          "'), which holds the model's sizes");
  json c;
  try {
    c = json::parse(in);
  } catch (const json::exception& e) {
    throw Error("config.json '" + file + "' is not valid JSON: " + e.what());
  }
  const ConfigReader r{c, "config.json '" + file + "': "};
  require(c.is_object(), r.where, "expected a JSON object");
  std::string type = "gpt2";
  if (c.contains("model_type")) {
    require(c["model_type"].is_string(), r.where, "model_type ", c["model_type"].dump(), ": expected a string");
    type = c["model_type"].get<std::string>();
  }
  if (type == "llama") return read_llama_config(r);
  require(type == "gpt2", r.where, "model_type \"", type,
          "\": mdtp loads GPT-2 (model_type \"gpt2\") and Llama (\"llama\") checkpoints");
  ModelShape m;
  m.vocab = r.needed("vocab_size", "vocab_size, n_positions, n_embd, n_layer, n_head");
  m.hidden = r.needed("n_embd", "vocab_size, n_positions, n_embd, n_layer, n_head");
  m.layers = r.needed("n_layer", "vocab_size, n_positions, n_embd, n_layer, n_head");
  m.heads = r.needed("n_head", "vocab_size, n_positions, n_embd, n_layer, n_head");
  const auto positions = r.integer("n_positions");
  m.seq = positions ? *positions : r.needed("n_ctx", "n_positions or n_ctx");

  // What mdtp's GPT-2 block is: the tanh GeLU, a 4·n_embd MLP, LayerNorm eps 1e-5, attention
  // scaled by 1/sqrt(head size), no cross-attention; its head tied (transformers' default) or not.
  // Anything else is another model.
  const std::string activation = c.contains("activation_function") && c["activation_function"].is_string()
                                     ? c["activation_function"].get<std::string>()
                                     : c.contains("activation_function") ? c["activation_function"].dump() : "gelu_new";
  require(activation == "gelu_new" || activation == "gelu_pytorch_tanh", r.where, "activation_function '", activation,
          "' is not implemented: mdtp's GPT-2 uses the tanh GeLU (gelu_new)");
  if (const auto inner = r.integer("n_inner"))
    require(*inner == 4 * m.hidden, r.where, "n_inner ", *inner, " is not implemented: mdtp's GPT-2 MLP is 4 · n_embd = ",
            4 * m.hidden);
  if (c.contains("layer_norm_epsilon")) {
    const json& eps = c["layer_norm_epsilon"];
    require(eps.is_number() && eps.get<double>() == 1e-5, r.where, "layer_norm_epsilon ", eps.dump(),
            " is not implemented: mdtp's LayerNorm uses 1e-5");
  }
  m.tied_head = r.flag("tie_word_embeddings", true);
  require(r.flag("scale_attn_weights", true), r.where,
          "scale_attn_weights false is not implemented: mdtp scales attention by 1/sqrt(head size)");
  require(!r.flag("scale_attn_by_inverse_layer_idx", false), r.where,
          "scale_attn_by_inverse_layer_idx true is not implemented");
  require(!r.flag("add_cross_attention", false), r.where, "add_cross_attention true is not implemented");
  return m;
}

void check_hf_output(const std::string& path, const ModelShape& model, const std::string& option) {
  require(path.ends_with(".safetensors"), option, " '", path,
          "': mdtp writes a Hugging Face checkpoint as one .safetensors file (an index .json is read only)");
  check_text_output(path, option);  // a writable place, not a directory
  std::error_code ec;
  if (fs::exists(path, ec)) {
    try {
      (void)SafetensorsFile::open(path);
    } catch (const std::exception&) {
      throw Error(option + " '" + path + "' exists but is not a safetensors file; refusing to touch it (choose another " +
                  option + ")");
    }
  }
  const std::string config = config_path(path);
  if (fs::exists(config, ec)) {
    bool same = false;
    try {
      same = same_model(read_hf_config(path), model);
    } catch (const std::exception&) {
    }
    require(same, option, " '", path, "': the config.json beside it ('", config, "') does not describe this run's model (",
            describe(model), "); refusing to replace it (choose another directory)");
  }
}

void save_hf_checkpoint(const std::string& path, GptModel& model, ZeroEngine& engine, MPI_Comm world) {
  const ModelShape& shape = model.config();
  const DType storage = optimizer_state_dtype(model.mode().context().dtype);  // f32 masters under bf16/f16
  const std::vector<HfTensor> tensors = hf_tensors(shape);
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  // Rank 0 writes; a failure there is kept while the others go on streaming (they must not be
  // left in a gather), and every rank throws it at the end.
  std::string error;
  std::unique_ptr<SafetensorsWriter> writer;
  if (rank == 0) {
    try {
      std::vector<SafetensorsEntrySpec> layout;
      for (const HfTensor& t : tensors) layout.push_back({t.name, t.shape, storage});
      writer = std::make_unique<SafetensorsWriter>(path, layout, std::map<std::string, std::string>{{"format", "pt"}});
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  const auto& params = engine.parameters();
  std::set<std::string> written;  // the tied wte and DualPipe's mirrored copies arrive twice
  stream_stage_tensors(
      params.size(),
      [&](std::size_t i) {
        return NamedTensor{params[i].name(), params[i].checkpoint_shape(), engine.gather_full(i, ZeroTensor::value)};
      },
      [&](NamedTensor&& t) {
        if (!writer || !error.empty() || !written.insert(t.name).second) return;
        try {
          // A fused tensor goes out as Hugging Face's separate ones, row block by row block.
          const std::int64_t cols = t.shape.back();
          for (const CheckpointPiece& piece : checkpoint_pieces(t.name, t.shape, shape)) {
            const HfTensor& hf = tensor_named(tensors, piece.name, shape);
            require(piece.shape == hf.mdtp_shape(), "parameter '", piece.name, "' has shape ", shape_string(piece.shape),
                    "; Hugging Face's ", hf_model_name(shape), " needs ", shape_string(hf.mdtp_shape()));
            const auto first = t.values.begin() + piece.first_row * cols;
            std::vector<double> values(first, first + piece.rows * cols);
            writer->write(piece.name, hf.conv1d ? transposed(values, piece.rows, cols) : values);
          }
        } catch (const std::exception& e) {
          error = e.what();
        }
      },
      model.mode().context().mesh, world);
  if (writer && error.empty()) {
    try {
      writer->finish();
      write_text_atomically(config_path(path), hf_config(shape, storage).dump(2) + "\n");
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  writer.reset();  // unfinished: its temporary file goes, `path` stays as it was
  run::run_on_root(world, [&] {
    if (!error.empty()) throw Error(error);
  });
}

void load_hf_checkpoint(const std::string& path, GptModel& model, ZeroEngine& engine) {
  const ModelShape saved = read_hf_config(path);
  require(same_model(saved, model.config()), "Hugging Face checkpoint '", path, "' holds a model of ", describe(saved),
          "; this run builds ", describe(model.config()));
  const SafetensorsCollection file = SafetensorsCollection::open(path);
  const std::string where = "Hugging Face checkpoint '" + path + "'";

  // Keys with the base model's prefix (the *ForCausalLM state dict: transformer. or model.) or
  // without it (the hub's GPT-2 files, and any file saved from the bare GPT2Model / LlamaModel).
  const std::string full_prefix = base_prefix(saved), wte_name = word_embedding_name(saved);
  std::string prefix = full_prefix;
  if (!file.has(wte_name)) {
    const std::string bare = wte_name.substr(full_prefix.size());
    require(file.has(bare), where, " has neither '", wte_name, "' nor '", bare, "': not a ", hf_model_name(saved),
            " state dict");
    prefix.clear();
  }
  auto key_of = [&](const std::string& name) {
    return prefix.empty() && name.starts_with(full_prefix) ? name.substr(full_prefix.size()) : name;
  };
  auto check_entry = [&](const std::string& key, const Shape& shape, bool conv1d) {
    require(file.has(key), where, " has no tensor '", key, "' (expected shape ", shape_string(shape), ")");
    const SafetensorsEntry& e = file.entry(key);
    require(e.shape == shape, where, ": tensor '", key, "' has shape ", shape_string(e.shape), "; this model needs ",
            shape_string(shape), conv1d ? " (Conv1D's [in, out])" : "");
    require(e.dtype.has_value(), where, ": tensor '", key, "' has dtype ", e.dtype_name,
            "; mdtp reads F32, F64, BF16 and F16");
  };

  // Everything is checked before any parameter changes: every tensor of the model with its shape
  // and a dtype mdtp reads, nothing else but the tolerated ones, a tied head equal to the embedding.
  const std::vector<HfTensor> tensors = hf_tensors(saved);
  std::set<std::string> expected;
  for (const HfTensor& t : tensors) {
    check_entry(key_of(t.name), t.shape, t.conv1d);
    expected.insert(key_of(t.name));
  }
  // Buffers the files carry that are no parameters: GPT-2's causal masks, Llama's inverse
  // frequencies (older transformers saved them).
  auto buffer = [&](const std::string& key) {
    if (is_llama(saved)) return key.ends_with("rotary_emb.inv_freq");
    return key.starts_with(prefix + "h.") && is_attention_mask_buffer(key);
  };
  const bool tied_copy_allowed = saved.tied_head;
  for (const std::string& key : file.names())
    require(expected.count(key) || (tied_copy_allowed && key == "lm_head.weight") || buffer(key), where, " holds '",
            key, "', which is not a tensor of this ", hf_model_name(saved), " (", describe(saved), ")");
  if (tied_copy_allowed && file.has("lm_head.weight")) {
    const std::string wte = key_of(wte_name);
    check_entry("lm_head.weight", file.entry(wte).shape, false);
    require(file.read("lm_head.weight") == file.read(wte), where, ": lm_head.weight differs from ", wte,
            "; this model ties the LM head to the token embedding");
  }
  const auto& params = engine.parameters();
  std::vector<std::vector<std::pair<CheckpointPiece, const HfTensor*>>> of_param;
  for (const ModelParam& p : params) {
    const Shape shape = p.checkpoint_shape();
    auto& pieces = of_param.emplace_back();
    for (const CheckpointPiece& piece : checkpoint_pieces(p.name(), shape, saved)) {
      const HfTensor& hf = tensor_named(tensors, piece.name, saved);
      require(piece.shape == hf.mdtp_shape(), "parameter '", piece.name, "' has shape ", shape_string(piece.shape),
              "; Hugging Face's ", hf_model_name(saved), " needs ", shape_string(hf.mdtp_shape()));
      pieces.emplace_back(piece, &hf);
    }
  }

  // One parameter at a time (its pieces concatenated by rows): each rank keeps its shard of it (no
  // communication).
  for (std::size_t i = 0; i < params.size(); ++i) {
    std::vector<double> values;
    for (const auto& [piece, hf] : of_param[i]) {
      std::vector<double> part = file.read(key_of(hf->name));
      if (hf->conv1d) part = transposed(part, hf->shape[0], hf->shape[1]);
      values.insert(values.end(), part.begin(), part.end());
    }
    engine.load_full(i, ZeroTensor::value, values);
  }
}

}  // namespace mdtp
