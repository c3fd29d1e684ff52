#include "train/checkpoint.hpp"

#include <map>
#include <set>

#include "mesh/mesh.hpp"
#include "io/h5_file.hpp"
#include "run/root_task.hpp"
#include "train/checkpoint_provenance.hpp"
#include "train/stage_gather.hpp"

namespace mdtp {
namespace {

const char* const kConfigKeys[] = {"vocab_size", "n_layer", "n_head", "n_embd", "block_size"};

std::int64_t config_value(const GptConfig& c, const std::string& key) {
  if (key == "vocab_size") return c.vocab_size;
  if (key == "n_layer") return c.n_layer;
  if (key == "n_head") return c.n_head;
  if (key == "n_embd") return c.n_embd;
  return c.block_size;
}

void write_config(H5File& file, const GptConfig& c) {
  for (const char* key : kConfigKeys) file.set_attribute("/", key, config_value(c, key));
}

// The full tensor of `what` for every parameter this stage holds (collective over tp and dp:
// the engine gathers its shards), then every stage's on world rank 0 (train/stage_gather.hpp), in
// the model's canonical order.
std::vector<NamedTensor> gather_everywhere(GptModel& model, ZeroEngine& engine, MPI_Comm world, ZeroTensor what) {
  std::vector<NamedTensor> mine;
  const auto& params = engine.parameters();
  for (std::size_t i = 0; i < params.size(); ++i)
    mine.push_back({params[i].name(), params[i].checkpoint_shape(), engine.gather_full(i, what)});
  return gather_stage_tensors(mine, model.mode().context().mesh, world, model.config());
}

void write_tensors(H5File& file, const std::string& prefix, const std::vector<NamedTensor>& tensors, DType storage) {
  for (const NamedTensor& t : tensors) file.write_real(prefix + t.name, t.shape, t.values, storage);
}

bool is_buffer(const std::string& key) {
  auto ends_with = [&](const std::string& s) { return key.size() >= s.size() && key.compare(key.size() - s.size(), s.size(), s) == 0; };
  return ends_with(".attn.bias") || ends_with(".attn.masked_bias");  // nanoGPT / HF causal-mask buffers
}

// Reads `key` and checks its shape; the error names the file, the key and both shapes.
std::vector<double> read_param(const H5File& file, const std::string& key, const Shape& expected) {
  require(file.has(key), "checkpoint '", file.path(), "' has no dataset '", key, "' (expected shape ",
          shape_string(expected), ")");
  const Shape shape = file.shape(key);
  require(shape == expected, "checkpoint '", file.path(), "': dataset '", key, "' has shape ", shape_string(shape),
          "; this model needs ", shape_string(expected));
  return file.read_real(key);
}

}  // namespace

GptConfig read_checkpoint_config(const std::string& path) {
  H5File file = H5File::open_read(path, "checkpoint");
  GptConfig c;
  std::map<std::string, std::int64_t> values;
  for (const char* key : kConfigKeys) {
    auto v = file.int_attribute("/", key);
    require(v.has_value(), "checkpoint '", path, "' has no root attribute '", key,
            "' (expected vocab_size, n_layer, n_head, n_embd, block_size)");
    require(*v > 0, "checkpoint '", path, "': root attribute ", key, "=", *v, " must be positive");
    values[key] = *v;
  }
  c.vocab_size = values["vocab_size"];
  c.n_layer = values["n_layer"];
  c.n_head = values["n_head"];
  c.n_embd = values["n_embd"];
  c.block_size = values["block_size"];
  return c;
}

void save_checkpoint(const std::string& path, GptModel& model, ZeroEngine& engine, const TrainingState& state,
                     MPI_Comm world) {
  const DType storage = model.mode().context().dtype;
  const auto values = gather_everywhere(model, engine, world, ZeroTensor::value);
  std::vector<NamedTensor> m, v;
  const bool moments = engine.has_moments();
  if (moments) {
    m = gather_everywhere(model, engine, world, ZeroTensor::exp_avg);
    v = gather_everywhere(model, engine, world, ZeroTensor::exp_avg_sq);
  }
  run::run_on_root(world, [&] {
    write_atomically(path, [&](H5File& file) {
      write_config(file, model.config());
      write_checkpoint_provenance(file, model.mode().context().mesh.topology());  // code version and mesh
      write_tensors(file, "", values, storage);
      file.create_group("optim");
      file.set_attribute("optim", "step", state.step);
      file.set_attribute("optim", "data_position", state.data_position);
      file.set_attribute("optim", "rng_state", static_cast<std::int64_t>(state.rng_state));
      file.set_attribute("optim", "optimizer", engine.optimizer_config().kind);
      if (!moments) return;
      file.create_group("optim/exp_avg");
      file.create_group("optim/exp_avg_sq");
      write_tensors(file, "optim/exp_avg/", m, storage);
      write_tensors(file, "optim/exp_avg_sq/", v, storage);
    });
  });
}

TrainingState load_checkpoint(const std::string& path, GptModel& model, ZeroEngine& engine) {
  const GptConfig saved = read_checkpoint_config(path);
  require(saved == model.config(), "checkpoint '", path, "' holds a model of ", describe(saved),
          "; this run builds ", describe(model.config()));
  H5File file = H5File::open_read(path, "checkpoint");
  const auto& params = engine.parameters();

  // Read and validate everything first: the model is only changed once the whole file is good.
  std::set<std::string> known{"optim", "lm_head.weight"};
  std::vector<std::vector<double>> values;
  for (const ModelParam& p : params) {
    values.push_back(read_param(file, p.name(), p.checkpoint_shape()));
    known.insert(p.name());
  }
  // Every dataset is a parameter of the model: held here, or (a pipeline stage holds a part of the
  // model) by another stage.
  for (const std::string& key : file.children("/"))
    require(known.count(key) || is_buffer(key) || unit_of_parameter(key, saved) >= 0, "checkpoint '", path,
            "' holds '", key, "', which is not a parameter of this model (", describe(saved), ")");
  if (file.has("lm_head.weight") && file.has("transformer.wte.weight")) {
    const Shape wte_shape = file.shape("transformer.wte.weight");
    const std::vector<double> head = read_param(file, "lm_head.weight", wte_shape);
    require(head == read_param(file, "transformer.wte.weight", wte_shape), "checkpoint '", path,
            "': lm_head.weight differs from transformer.wte.weight; this GPT ties the LM head to the token embedding");
  }
  TrainingState state;
  std::vector<std::vector<double>> m, v;
  bool moments = false;
  if (file.has("optim")) {
    auto attr = [&](const char* name) {
      auto value = file.int_attribute("optim", name);
      require(value.has_value() && *value >= 0, "checkpoint '", path, "': /optim needs a non-negative integer attribute '",
              name, "'");
      return *value;
    };
    state.step = attr("step");
    state.data_position = attr("data_position");
    state.rng_state = static_cast<std::uint64_t>(attr("rng_state"));
    moments = engine.has_moments() && file.has("optim/exp_avg");
    if (moments)
      for (const ModelParam& p : params) {
        m.push_back(read_param(file, "optim/exp_avg/" + p.name(), p.checkpoint_shape()));
        v.push_back(read_param(file, "optim/exp_avg_sq/" + p.name(), p.checkpoint_shape()));
      }
  }
  // Each rank keeps its own shard (tensor-parallel, and over dp under ZeRO) of every tensor.
  for (std::size_t i = 0; i < params.size(); ++i) {
    engine.load_full(i, ZeroTensor::value, values[i]);
    if (moments) {
      engine.load_full(i, ZeroTensor::exp_avg, m[i]);
      engine.load_full(i, ZeroTensor::exp_avg_sq, v[i]);
    }
  }
  // A different optimizer (or none saved) starts its own step count; the data position carries on.
  engine.set_step_count(moments || !engine.has_moments() ? state.step : 0);
  return state;
}

void dump_gradients(const std::string& path, GptModel& model, ZeroEngine& engine, std::int64_t step, double loss,
                    MPI_Comm world) {
  const auto grads = gather_everywhere(model, engine, world, ZeroTensor::grad);
  run::run_on_root(world, [&] {
    write_atomically(path, [&](H5File& file) {
      write_config(file, model.config());
      write_tensors(file, "", grads, model.mode().context().dtype);
      file.set_attribute("/", "step", step);
      file.set_attribute("/", "loss", loss);
    });
  });
}

}  // namespace mdtp
