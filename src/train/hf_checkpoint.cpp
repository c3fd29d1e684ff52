#include "train/hf_checkpoint.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "io/atomic_file.hpp"
#include "io/output_path.hpp"
#include "io/safetensors.hpp"
#include "model/gpt_config.hpp"
#include "plan/bucket_plan.hpp"  // optimizer_state_dtype
#include "run/root_task.hpp"
#include "train/stage_gather.hpp"

namespace mdtp {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kPrefix = "transformer.";

// One tensor of GPT2LMHeadModel's state dict: its key (with the transformer. prefix, which is also
// mdtp's parameter name) and its shape in the file.  The Conv1D weights are [in, out] there and
// mdtp's checkpoint layout is their transpose.
struct HfTensor {
  std::string name;
  Shape shape;
  bool conv1d = false;

  Shape mdtp_shape() const { return conv1d ? Shape{shape[1], shape[0]} : shape; }
};

// Every tensor of the model in state-dict order, without the tied lm_head.weight (which
// save_pretrained leaves out too).
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
  return out;
}

const HfTensor& tensor_named(const std::vector<HfTensor>& tensors, const std::string& name) {
  for (const HfTensor& t : tensors)
    if (t.name == name) return t;
  throw Error("parameter '" + name + "' is not a tensor of Hugging Face's GPT-2 state dict");
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

bool same_sizes(const ModelShape& a, const ModelShape& b) {
  return a.vocab == b.vocab && a.layers == b.layers && a.heads == b.heads && a.hidden == b.hidden && a.seq == b.seq;
}

// The config.json transformers writes for this GPT-2 (its names and defaults), in the dtype the
// weights are stored in.
json hf_config(const ModelShape& m, DType storage) {
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
              {"tie_word_embeddings", true},
              {"torch_dtype", storage == DType::f64 ? "float64" : "float32"}};
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
  const std::string where = "config.json '" + file + "': ";
  require(c.is_object(), where, "expected a JSON object");
  if (c.contains("model_type")) {
    const json& type = c["model_type"];
    require(type.is_string() && type.get<std::string>() == "gpt2", where, "model_type ", type.dump(),
            ": mdtp loads GPT-2 checkpoints (model_type \"gpt2\")");
  }
  auto integer = [&](const char* key) -> std::optional<std::int64_t> {
    if (!c.contains(key) || c[key].is_null()) return std::nullopt;
    require(c[key].is_number_integer() && c[key].get<std::int64_t>() > 0, where, key, " ", c[key].dump(),
            ": expected a positive integer");
    return c[key].get<std::int64_t>();
  };
  auto needed = [&](const char* key) {
    const auto v = integer(key);
    require(v.has_value(), where, "no ", key, " (expected vocab_size, n_positions, n_embd, n_layer, n_head)");
    return *v;
  };
  auto flag = [&](const char* key, bool fallback) {
    if (!c.contains(key) || c[key].is_null()) return fallback;
    require(c[key].is_boolean(), where, key, " ", c[key].dump(), ": expected true or false");
    return c[key].get<bool>();
  };
  ModelShape m;
  m.vocab = needed("vocab_size");
  m.hidden = needed("n_embd");
  m.layers = needed("n_layer");
  m.heads = needed("n_head");
  const auto positions = integer("n_positions");
  m.seq = positions ? *positions : needed("n_ctx");

  // What mdtp's GPT-2 block is: the tanh GeLU, a 4·n_embd MLP, LayerNorm eps 1e-5, attention
  // scaled by 1/sqrt(head size), a tied head, no cross-attention.  Anything else is another model.
  const std::string activation = c.contains("activation_function") && c["activation_function"].is_string()
                                     ? c["activation_function"].get<std::string>()
                                     : c.contains("activation_function") ? c["activation_function"].dump() : "gelu_new";
  require(activation == "gelu_new" || activation == "gelu_pytorch_tanh", where, "activation_function '", activation,
          "' is not implemented: mdtp's GPT-2 uses the tanh GeLU (gelu_new)");
  if (const auto inner = integer("n_inner"))
    require(*inner == 4 * m.hidden, where, "n_inner ", *inner, " is not implemented: mdtp's GPT-2 MLP is 4 · n_embd = ",
            4 * m.hidden);
  if (c.contains("layer_norm_epsilon")) {
    const json& eps = c["layer_norm_epsilon"];
    require(eps.is_number() && eps.get<double>() == 1e-5, where, "layer_norm_epsilon ", eps.dump(),
            " is not implemented: mdtp's LayerNorm uses 1e-5");
  }
  require(flag("tie_word_embeddings", true), where,
          "tie_word_embeddings false is not implemented: mdtp's GPT-2 ties the LM head to wte");
  require(flag("scale_attn_weights", true), where,
          "scale_attn_weights false is not implemented: mdtp scales attention by 1/sqrt(head size)");
  require(!flag("scale_attn_by_inverse_layer_idx", false), where,
          "scale_attn_by_inverse_layer_idx true is not implemented");
  require(!flag("add_cross_attention", false), where, "add_cross_attention true is not implemented");
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
      same = same_sizes(read_hf_config(path), model);
    } catch (const std::exception&) {
    }
    require(same, option, " '", path, "': the config.json beside it ('", config, "') does not describe this run's model (",
            describe(model), "); refusing to replace it (choose another directory)");
  }
}

void save_hf_checkpoint(const std::string& path, GptModel& model, ZeroEngine& engine, MPI_Comm world) {
  const ModelShape& shape = model.config();
  const DType storage = optimizer_state_dtype(model.mode().context().dtype);  // f32 masters under bf16/f16
  const std::vector<HfTensor> tensors = gpt2_tensors(shape);
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
          const HfTensor& hf = tensor_named(tensors, t.name);
          require(t.shape == hf.mdtp_shape(), "parameter '", t.name, "' has shape ", shape_string(t.shape),
                  "; Hugging Face's GPT-2 needs ", shape_string(hf.mdtp_shape()));
          writer->write(t.name, hf.conv1d ? transposed(t.values, t.shape[0], t.shape[1]) : t.values);
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
  require(same_sizes(saved, model.config()), "Hugging Face checkpoint '", path, "' holds a model of ", describe(saved),
          "; this run builds ", describe(model.config()));
  const SafetensorsCollection file = SafetensorsCollection::open(path);
  const std::string where = "Hugging Face checkpoint '" + path + "'";

  // Keys with the transformer. prefix (GPT2LMHeadModel's state dict) or without (the hub's files,
  // saved from GPT2Model).
  std::string prefix = kPrefix;
  if (!file.has("transformer.wte.weight")) {
    require(file.has("wte.weight"), where,
            " has neither 'transformer.wte.weight' nor 'wte.weight': not a GPT-2 state dict");
    prefix.clear();
  }
  auto key_of = [&](const std::string& name) { return prefix.empty() ? name.substr(kPrefix.size()) : name; };
  auto check_entry = [&](const std::string& key, const Shape& shape, bool conv1d) {
    require(file.has(key), where, " has no tensor '", key, "' (expected shape ", shape_string(shape), ")");
    const SafetensorsEntry& e = file.entry(key);
    require(e.shape == shape, where, ": tensor '", key, "' has shape ", shape_string(e.shape), "; this model needs ",
            shape_string(shape), conv1d ? " (Conv1D's [in, out])" : "");
    require(e.dtype.has_value(), where, ": tensor '", key, "' has dtype ", e.dtype_name,
            "; mdtp reads F32, F64, BF16 and F16");
  };

  // Everything is checked before any parameter changes: every tensor of the model with its shape
  // and a dtype mdtp reads, nothing else but the tolerated ones, a tied head equal to wte.
  const std::vector<HfTensor> tensors = gpt2_tensors(saved);
  std::set<std::string> expected;
  for (const HfTensor& t : tensors) {
    check_entry(key_of(t.name), t.shape, t.conv1d);
    expected.insert(key_of(t.name));
  }
  const std::string block_prefix = prefix + "h.";
  for (const std::string& key : file.names()) {
    const bool mask_buffer = key.starts_with(block_prefix) && is_attention_mask_buffer(key);
    require(expected.count(key) || key == "lm_head.weight" || mask_buffer, where, " holds '", key,
            "', which is not a tensor of this GPT-2 (", describe(saved), ")");
  }
  if (file.has("lm_head.weight")) {
    const std::string wte = key_of("transformer.wte.weight");
    check_entry("lm_head.weight", file.entry(wte).shape, false);
    require(file.read("lm_head.weight") == file.read(wte), where, ": lm_head.weight differs from ", wte,
            "; mdtp's GPT-2 ties the LM head to the token embedding");
  }
  const auto& params = engine.parameters();
  std::vector<const HfTensor*> of_param;
  for (const ModelParam& p : params) {
    const HfTensor& hf = tensor_named(tensors, p.name());
    require(p.checkpoint_shape() == hf.mdtp_shape(), "parameter '", p.name(), "' has shape ",
            shape_string(p.checkpoint_shape()), "; Hugging Face's GPT-2 needs ", shape_string(hf.mdtp_shape()));
    of_param.push_back(&hf);
  }

  // One tensor at a time: each rank keeps its shard of it (no communication).
  for (std::size_t i = 0; i < params.size(); ++i) {
    const HfTensor& hf = *of_param[i];
    std::vector<double> values = file.read(key_of(hf.name));
    if (hf.conv1d) values = transposed(values, hf.shape[0], hf.shape[1]);
    engine.load_full(i, ZeroTensor::value, values);
  }
}

}  // namespace mdtp
