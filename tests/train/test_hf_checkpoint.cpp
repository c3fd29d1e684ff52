// Hugging Face checkpoints through mdtp train (train/hf_checkpoint.hpp), on 4 ranks:
//  - `--save x.safetensors` holds exactly the weights the HDF5 checkpoint of the same run holds
//    (Conv1D weights transposed to [in, out]), with __metadata__ {"format": "pt"} and a
//    config.json; loaded under other layouts (ZeRO-3 with a pipeline, 2D) and saved again, it
//    comes back bit for bit;
//  - files written by a plain Python script with numpy (the format, not the library) in the hub's
//    shape (no transformer. prefix, attn.bias buffers, a tied lm_head.weight, F64 and F32 mixed) and
//    as shards behind a model.safetensors.index.json load the same weights: the first loss is
//    bit-identical to the run from mdtp's own file;
//  - bad input (a missing, extra, misshapen or integer tensor, an lm_head that is not wte, a config
//    mdtp does not implement, a model of other sizes) fails on every rank in one line naming the
//    tensor or field, before the run; a --save that would overwrite a file of another kind or
//    another model's config.json is refused before the run and leaves them as they were.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/h5_file.hpp"
#include "io/safetensors.hpp"
#include "support/gpt_harness.hpp"
#include "train/trainer.hpp"

using namespace mdtp;
using namespace mdtp::testing;
namespace fs = std::filesystem;

namespace {

int world() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

TrainConfig base_config() {
  TrainConfig t;
  t.spec.model = ModelShape{2, 32, 4, 16, 0};  // vocabulary from the shipped corpus
  t.spec.global_batch = 4;
  t.spec.layout.mode = TpMode::d1;
  t.spec.layout.tp = 2;
  t.spec.optimizer.lr = 2e-2;
  t.spec.precision = precision_for(DType::f32);
  t.spec.seed = 11;
  t.steps = 2;
  return t;
}

bool is_conv1d(const std::string& name) {
  for (const char* suffix : {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"}) {
    const std::string s = suffix;
    if (name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) return true;
  }
  return false;
}

std::vector<double> transposed(const std::vector<double>& v, std::int64_t rows, std::int64_t cols) {
  std::vector<double> out(v.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) out[c * rows + r] = v[r * cols + c];
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// The parameters of an HDF5 checkpoint (the /optim group aside), in mdtp's layout.
std::map<std::string, std::pair<Shape, std::vector<double>>> h5_params(const std::string& path) {
  const H5File f = H5File::open_read(path, "test");
  std::map<std::string, std::pair<Shape, std::vector<double>>> out;
  for (const std::string& key : f.children("/"))
    if (key != "optim") out[key] = {f.shape(key), f.read_real(key)};
  return out;
}

// Every tensor of two safetensors files equal bit for bit (same names, shapes, dtypes).
void check_same_tensors(const std::string& a, const std::string& b) {
  const SafetensorsFile fa = SafetensorsFile::open(a), fb = SafetensorsFile::open(b);
  REQUIRE(fa.entries().size() == fb.entries().size());
  for (const SafetensorsEntry& e : fa.entries()) {
    CAPTURE(e.name);
    REQUIRE(fb.has(e.name));
    CHECK(fb.entry(e.name).shape == e.shape);
    CHECK(fb.entry(e.name).dtype_name == e.dtype_name);
    CHECK(fb.read(e.name) == fa.read(e.name));
  }
}

std::string numpy_python() {
  const char* from_env = std::getenv("MDTP_NUMPY_PYTHON");
  return from_env != nullptr ? from_env : MDTP_NUMPY_PYTHON;
}

// A copy of a valid file with its header changed by `edit` (the data as it was).
void rewrite_header(const std::string& from, const std::string& to,
                    const std::function<void(nlohmann::json&)>& edit) {
  const std::string bytes = slurp(from);
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  edit(header);
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  std::ofstream(to, std::ios::binary) << out << text << bytes.substr(8 + n);
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace

TEST_CASE("mdtp train: Hugging Face safetensors checkpoints saved, loaded in other layouts, and refused",
          "[train][checkpoint][safetensors]") {
  if (world() != 4) return;
  const bool root = world_rank() == 0;
  const std::string dir = shared_path("hf");
  if (root) fs::create_directories(dir + "/saved");
  MPI_Barrier(MPI_COMM_WORLD);

  // Two steps in 1D (tp 2, dp 2), saved both ways.
  TrainConfig first = base_config();
  first.save = dir + "/saved/model.safetensors";
  train(first, MPI_COMM_WORLD);
  TrainConfig same = base_config();
  same.save = dir + "/saved.h5";
  train(same, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);

  SECTION("the safetensors file holds the HDF5 checkpoint's weights, in transformers' GPT-2 layout") {
    const SafetensorsFile st = SafetensorsFile::open(first.save);
    CHECK(st.metadata() == std::map<std::string, std::string>{{"format", "pt"}});
    const auto h5 = h5_params(same.save);
    CHECK(st.entries().size() == h5.size());  // every parameter once, no lm_head (tied)
    CHECK(!st.has("lm_head.weight"));
    for (const auto& [name, tensor] : h5) {
      CAPTURE(name);
      REQUIRE(st.has(name));
      const SafetensorsEntry& e = st.entry(name);
      CHECK(e.dtype_name == "F32");
      const Shape& s = tensor.first;
      if (is_conv1d(name)) {
        CHECK(e.shape == Shape{s[1], s[0]});
        CHECK(st.read(name) == transposed(tensor.second, s[0], s[1]));
      } else {
        CHECK(e.shape == s);
        CHECK(st.read(name) == tensor.second);
      }
    }
    const nlohmann::json config = nlohmann::json::parse(slurp(dir + "/saved/config.json"));
    CHECK(config.at("model_type") == "gpt2");
    CHECK(config.at("n_layer") == 2);
    CHECK(config.at("n_embd") == 32);
    CHECK(config.at("n_head") == 4);
    CHECK(config.at("n_positions") == 16);
    CHECK(config.at("vocab_size") == h5.at("transformer.wte.weight").first[0]);
  }

  SECTION("loaded under ZeRO-3 with a pipeline and under 2D, then saved again: bit for bit") {
    TrainConfig zero3 = base_config();
    zero3.steps = 0;
    zero3.spec.layout.mode = TpMode::none;
    zero3.spec.layout.tp = 1;
    zero3.spec.layout.pp = 2;
    zero3.spec.layout.micro_batches = 2;
    zero3.spec.zero.stage = 3;
    zero3.spec.model = ModelShape{0, 0, 0, 0, 0};  // the sizes from config.json
    zero3.init_from = first.save;
    zero3.save = dir + "/zero3/model.safetensors";
    train(zero3, MPI_COMM_WORLD);
    TrainConfig summa = zero3;
    summa.spec.layout = base_config().spec.layout;
    summa.spec.layout.mode = TpMode::d2;
    summa.spec.layout.tp = 4;
    summa.spec.zero.stage = 0;
    summa.init_from = zero3.save;
    summa.save = dir + "/2d/model.safetensors";
    train(summa, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    check_same_tensors(first.save, zero3.save);
    check_same_tensors(first.save, summa.save);
    CHECK(slurp(summa.save) == slurp(first.save));  // the same bytes, header included
  }

  SECTION("an untied GPT-2 head: lm_head.weight as a Linear [V, H], tie_word_embeddings false, back bit for bit") {
    TrainConfig untied = base_config();
    untied.spec.model.tied_head = false;
    untied.save = dir + "/untied/model.safetensors";
    train(untied, MPI_COMM_WORLD);
    TrainConfig untied_h5 = untied;
    untied_h5.save = dir + "/untied.h5";
    train(untied_h5, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    const SafetensorsFile st = SafetensorsFile::open(untied.save);
    const auto h5 = h5_params(untied_h5.save);
    REQUIRE(h5.count("lm_head.weight") == 1);
    CHECK(st.entries().size() == h5.size());  // every parameter once, the head included
    REQUIRE(st.has("lm_head.weight"));
    CHECK(st.entry("lm_head.weight").shape == h5.at("lm_head.weight").first);  // [V, H]: a Linear, not a Conv1D
    CHECK(st.entry("lm_head.weight").shape == h5.at("transformer.wte.weight").first);
    CHECK(st.read("lm_head.weight") == h5.at("lm_head.weight").second);
    CHECK(st.read("lm_head.weight") != st.read("transformer.wte.weight"));  // trained apart
    const nlohmann::json config = nlohmann::json::parse(slurp(dir + "/untied/config.json"));
    CHECK(config.at("tie_word_embeddings") == false);
    // Loaded with the sizes and the untied head from config.json, under 2D, and saved again.
    TrainConfig summa = base_config();
    summa.steps = 0;
    summa.spec.model = ModelShape{0, 0, 0, 0, 0};
    summa.spec.layout.mode = TpMode::d2;
    summa.spec.layout.tp = 4;
    summa.init_from = untied.save;
    summa.save = dir + "/untied-2d/model.safetensors";
    train(summa, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(slurp(summa.save) == slurp(untied.save));
    // The HDF5 checkpoint keeps the untie too: resumed, the same head.
    TrainConfig resumed = summa;
    resumed.init_from = untied_h5.save;
    resumed.save = dir + "/untied-resumed/model.safetensors";
    train(resumed, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(slurp(resumed.save) == slurp(untied.save));
  }

  SECTION("files written by numpy, hub-style and sharded, give the first loss of mdtp's own file") {
    const std::string python = numpy_python();
    if (python.empty()) {
      WARN("no python3 with numpy (MDTP_NUMPY_PYTHON): the numpy-written checkpoints are not tried");
      return;
    }
    if (root) {
      // The weights, in mdtp's layout, as exact hexadecimal floats for the script.
      nlohmann::json tensors = nlohmann::json::array();
      for (const auto& [name, tensor] : h5_params(same.save)) {
        nlohmann::json values = nlohmann::json::array();
        char buf[64];
        for (double v : tensor.second) {
          std::snprintf(buf, sizeof buf, "%a", v);
          values.push_back(buf);
        }
        tensors.push_back({{"name", name}, {"shape", tensor.first}, {"values", values}});
      }
      write_text(dir + "/weights.json", tensors.dump());
      const std::string command = "'" + python + "' '" + MDTP_HF_SCRIPT + "' '" + dir + "/weights.json' '" + dir + "'";
      REQUIRE(std::system(command.c_str()) == 0);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    TrainConfig own = base_config();
    own.steps = 1;
    own.spec.model = ModelShape{0, 0, 0, 0, 0};
    own.init_from = first.save;
    const double loss = train(own, MPI_COMM_WORLD).steps.at(0).loss;
    for (const char* from : {"/hub/model.safetensors", "/sharded/model.safetensors.index.json"}) {
      CAPTURE(from);
      TrainConfig t = own;
      t.init_from = dir + from;
      CHECK(train(t, MPI_COMM_WORLD).steps.at(0).loss == loss);
    }
  }

  SECTION("bad input: one line naming the tensor or field, on every rank, before the run") {
    const std::string good = first.save;
    auto expect_refused = [&](const std::string& sub, const std::function<void(const std::string&)>& make,
                              const std::string& message_part) {
      const std::string d = dir + "/bad-" + sub;
      if (root) {
        fs::create_directories(d);
        fs::copy_file(dir + "/saved/config.json", d + "/config.json", fs::copy_options::overwrite_existing);
        make(d);
      }
      MPI_Barrier(MPI_COMM_WORLD);
      TrainConfig t = base_config();
      t.steps = 1;
      t.spec.model = ModelShape{0, 0, 0, 0, 0};
      t.init_from = d + "/model.safetensors";
      std::string what;
      try {
        train(t, MPI_COMM_WORLD);
      } catch (const Error& e) {
        what = e.what();
      }
      CAPTURE(sub, what);
      CHECK(what.find(message_part) != std::string::npos);
      CHECK(what.find('\n') == std::string::npos);
    };
    auto with_header = [&](const std::function<void(nlohmann::json&)>& edit) {
      return [&, edit](const std::string& d) { rewrite_header(good, d + "/model.safetensors", edit); };
    };
    // Tensors: dropping an entry from the header also leaves a hole, which the format refuses
    // first; so a missing tensor is made by renaming it, which is then also an extra one.
    expect_refused("missing", with_header([](nlohmann::json& h) {
                     h["transformer.h.1.mlp.c_fc.weight.x"] = h["transformer.h.1.mlp.c_fc.weight"];
                     h.erase("transformer.h.1.mlp.c_fc.weight");
                   }),
                   "has no tensor 'transformer.h.1.mlp.c_fc.weight' (expected shape [32, 128])");
    expect_refused("shape", with_header([](nlohmann::json& h) {
                     h["transformer.h.0.attn.c_attn.weight"]["shape"] = {96, 32};  // mdtp's layout, not Conv1D's
                   }),
                   "tensor 'transformer.h.0.attn.c_attn.weight' has shape [96, 32]; this model needs [32, 96] "
                   "(Conv1D's [in, out])");
    expect_refused("dtype", with_header([](nlohmann::json& h) { h["transformer.ln_f.bias"]["dtype"] = "I32"; }),
                   "tensor 'transformer.ln_f.bias' has dtype I32; mdtp reads F32, F64, BF16 and F16");
    expect_refused("offsets", with_header([](nlohmann::json& h) {
                     h["transformer.ln_f.bias"]["data_offsets"][1] = h["transformer.ln_f.bias"]["data_offsets"][1].get<int>() + 4;
                   }),
                   "transformer.ln_f.bias");
    expect_refused("extra", [&](const std::string& d) {
                     const SafetensorsFile f = SafetensorsFile::open(good);
                     std::vector<SafetensorsTensor> ts;
                     for (const SafetensorsEntry& e : f.entries()) ts.push_back({e.name, e.shape, DType::f32, f.read(e.name)});
                     ts.push_back({"transformer.h.0.attn.rotary_emb.inv_freq", {4}, DType::f32, {1, 2, 3, 4}});
                     write_safetensors(d + "/model.safetensors", ts, {{"format", "pt"}});
                   },
                   "holds 'transformer.h.0.attn.rotary_emb.inv_freq', which is not a tensor of this GPT-2");
    expect_refused("untied", [&](const std::string& d) {
                     const SafetensorsFile f = SafetensorsFile::open(good);
                     std::vector<SafetensorsTensor> ts;
                     for (const SafetensorsEntry& e : f.entries()) ts.push_back({e.name, e.shape, DType::f32, f.read(e.name)});
                     std::vector<double> head = f.read("transformer.wte.weight");
                     head[5] += 1.0;
                     ts.push_back({"lm_head.weight", f.entry("transformer.wte.weight").shape, DType::f32, head});
                     write_safetensors(d + "/model.safetensors", ts, {{"format", "pt"}});
                   },
                   "lm_head.weight differs from transformer.wte.weight");
    // The config.
    auto with_config = [&](const std::function<void(nlohmann::json&)>& edit) {
      return [&, edit](const std::string& d) {
        fs::copy_file(good, d + "/model.safetensors", fs::copy_options::overwrite_existing);
        nlohmann::json c = nlohmann::json::parse(slurp(d + "/config.json"));
        edit(c);
        write_text(d + "/config.json", c.dump());
      };
    };
    expect_refused("relu", with_config([](nlohmann::json& c) { c["activation_function"] = "relu"; }),
                   "activation_function 'relu' is not implemented");
    expect_refused("bert", with_config([](nlohmann::json& c) { c["model_type"] = "bert"; }),
                   "model_type \"bert\": mdtp loads GPT-2 (model_type \"gpt2\") and Llama (\"llama\") checkpoints");
    // A GPT-2 config relabelled llama is read as LlamaConfig, which names its sizes differently.
    expect_refused("llama", with_config([](nlohmann::json& c) { c["model_type"] = "llama"; }), "no hidden_size");
    expect_refused("inner", with_config([](nlohmann::json& c) { c["n_inner"] = 100; }),
                   "n_inner 100 is not implemented");
    expect_refused("eps", with_config([](nlohmann::json& c) { c["layer_norm_epsilon"] = 1e-6; }),
                   "layer_norm_epsilon 1e-06 is not implemented");
    expect_refused("no-layers", with_config([](nlohmann::json& c) { c.erase("n_layer"); }), "no n_layer");
    // A config that unties the head needs the head's own tensor.
    expect_refused("untied-no-head", with_config([](nlohmann::json& c) { c["tie_word_embeddings"] = false; }),
                   "has no tensor 'lm_head.weight' (expected shape ");
    expect_refused("sizes", with_config([](nlohmann::json& c) { c["n_layer"] = 3; }),
                   "has no tensor 'transformer.h.2.ln_1.weight'");
    expect_refused("no-config", [&](const std::string& d) {
                     fs::copy_file(good, d + "/model.safetensors", fs::copy_options::overwrite_existing);
                     fs::remove(d + "/config.json");
                   },
                   "has no config.json beside it");
  }

  SECTION("--save refuses, before the run, to overwrite another kind of file or another model's config.json") {
    const std::string d = dir + "/occupied";
    if (root) {
      fs::create_directories(d);
      write_text(d + "/model.safetensors", "not a safetensors file");
      write_text(dir + "/saved/config.json.keep", slurp(dir + "/saved/config.json"));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    TrainConfig t = base_config();
    t.save = d + "/model.safetensors";
    CHECK_THROWS_WITH(train(t, MPI_COMM_WORLD),
                      "--save '" + t.save + "' exists but is not a safetensors file; refusing to touch it (choose another --save)");
    CHECK(slurp(t.save) == "not a safetensors file");

    TrainConfig bigger = base_config();
    bigger.spec.model.layers = 3;
    bigger.save = dir + "/saved/model.safetensors";
    CHECK_THROWS_WITH(train(bigger, MPI_COMM_WORLD), Catch::Contains("does not describe this run's model") &&
                                                          Catch::Contains("refusing to replace it"));
    CHECK(slurp(dir + "/saved/config.json") == slurp(dir + "/saved/config.json.keep"));
    CHECK_THROWS_WITH([&] {
      TrainConfig index = base_config();
      index.save = dir + "/x.safetensors.index.json";
      train(index, MPI_COMM_WORLD);
    }(), Catch::Contains("writes a Hugging Face checkpoint as one .safetensors file"));
  }
}
