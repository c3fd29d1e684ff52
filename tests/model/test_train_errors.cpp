// What a training run refuses — bad checkpoints, bad token data — with a clear error on every
// rank (each rank calls train on MPI_COMM_WORLD and must throw the same message, not hang), and
// what it accepts (an f32 checkpoint, an lm_head.weight equal to wte).  Outputs are written
// through a temporary file: an existing file survives a failed run.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "support/gpt_harness.hpp"
#include "io/h5_file.hpp"
#include "run/root_task.hpp"
#include "io/token_data.hpp"
#include "train/trainer.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

std::string dir() {
  static const SharedTempDir d("mdtp-train-errors-");
  return d.path();
}

std::string path_of(const std::string& name) { return dir() + "/" + name; }

struct Checkpoint {
  std::map<std::string, std::int64_t> attrs;
  std::map<std::string, std::pair<Shape, std::vector<double>>> tensors;  // root datasets only
};

Checkpoint read_checkpoint(const std::string& path) {
  H5File f = H5File::open_read(path, "checkpoint");
  Checkpoint c;
  for (const char* key : {"vocab_size", "n_layer", "n_head", "n_embd", "block_size"}) c.attrs[key] = *f.int_attribute("/", key);
  for (const std::string& key : f.children("/"))
    if (key != "optim") c.tensors[key] = {f.shape(key), f.read_real(key)};
  return c;
}

// Written by rank 0; every rank returns once it exists.
std::string write_checkpoint(const std::string& name, const Checkpoint& c, DType storage = DType::f64) {
  const std::string path = path_of(name);
  run::run_on_root(MPI_COMM_WORLD, [&] {
    write_atomically(path, [&](H5File& f) {
      for (const auto& [key, value] : c.attrs) f.set_attribute("/", key, value);
      for (const auto& [key, t] : c.tensors) f.write_real(key, t.first, t.second, storage);
    });
  });
  return path;
}

std::string write_tokens(const std::string& name, const TokenData& data) {
  const std::string path = path_of(name);
  run::run_on_root(MPI_COMM_WORLD, [&] { write_token_file(path, data); });
  return path;
}

struct Setup {
  ModelSize size = model_size_for_world(world_size());
  ModeCase mode = model_cases_for_world(world_size()).front();
  TokenData tokens;
  std::string data, good;
  Setup() {
    TokenBatch b = random_batch(size.config, 2 * size.batch, 5);
    tokens = TokenData{2 * size.batch, size.config.seq, b.inputs, b.targets, size.config.vocab, ""};
    data = write_tokens("tokens.h5", tokens);
    TrainConfig t = config();
    t.steps = 0;  // saves the initial model
    t.save = path_of("good.h5");
    train(t, MPI_COMM_WORLD);
    good = t.save;
  }
  TrainConfig config() const {
    TrainConfig t;
    t.spec.layout.mode = mode.mode;
    t.spec.layout.tp = mode.config.tp;
    t.spec.layout.depth = mode.config.tp_depth;
    t.spec.model = size.config;
    t.spec.global_batch = size.batch;
    t.steps = 1;
    t.spec.precision = precision_for(DType::f64);
    t.data = data;
    return t;
  }
  TrainConfig resume_from(const std::string& checkpoint) const {
    TrainConfig t = config();
    t.init_from = checkpoint;
    return t;
  }
};

}  // namespace

TEST_CASE("bad checkpoints are refused with a clear error on every rank", "[train][errors][checkpoint]") {
  Setup s;
  const Checkpoint good = read_checkpoint(s.good);

  Checkpoint missing = good;
  missing.tensors.erase("transformer.h.1.mlp.c_fc.bias");
  CHECK_THROWS_WITH(train(s.resume_from(write_checkpoint("missing.h5", missing)), MPI_COMM_WORLD),
                    Catch::Contains("has no dataset 'transformer.h.1.mlp.c_fc.bias'"));

  Checkpoint shape = good;
  auto& wpe = shape.tensors.at("transformer.wpe.weight");
  wpe.first[0] += 1;
  wpe.second.resize(static_cast<std::size_t>(shape_numel(wpe.first)), 0.0);
  CHECK_THROWS_WITH(train(s.resume_from(write_checkpoint("shape.h5", shape)), MPI_COMM_WORLD),
                    Catch::Contains("'transformer.wpe.weight' has shape " + shape_string(wpe.first)) &&
                        Catch::Contains("needs"));

  Checkpoint layers = good;
  layers.attrs["n_layer"] = 3;
  CHECK_THROWS_WITH(train(s.resume_from(write_checkpoint("layers.h5", layers)), MPI_COMM_WORLD),
                    Catch::Contains("--layers 3 but --layers 2 was given"));

  Checkpoint no_attr = good;
  no_attr.attrs.erase("n_head");
  CHECK_THROWS_WITH(train(s.resume_from(write_checkpoint("no_attr.h5", no_attr)), MPI_COMM_WORLD),
                    Catch::Contains("has no root attribute 'n_head'"));

  Checkpoint extra = good;
  extra.tensors["transformer.h.9.ln_1.weight"] = {{3}, {1, 2, 3}};
  CHECK_THROWS_WITH(train(s.resume_from(write_checkpoint("extra.h5", extra)), MPI_COMM_WORLD),
                    Catch::Contains("'transformer.h.9.ln_1.weight', which is not a parameter"));

  Checkpoint head = good;
  head.tensors["lm_head.weight"] = good.tensors.at("transformer.wte.weight");
  head.tensors["lm_head.weight"].second[3] += 1.0;
  CHECK_THROWS_WITH(train(s.resume_from(write_checkpoint("head.h5", head)), MPI_COMM_WORLD),
                    Catch::Contains("lm_head.weight differs from transformer.wte.weight"));

  const std::string text = path_of("not_hdf5.h5");
  run::run_on_root(MPI_COMM_WORLD, [&] { std::ofstream(text) << "not a checkpoint\n"; });
  CHECK_THROWS_WITH(train(s.resume_from(text), MPI_COMM_WORLD), Catch::Contains("is not an HDF5 file"));
  CHECK_THROWS_WITH(train(s.resume_from(path_of("absent.h5")), MPI_COMM_WORLD), Catch::Contains("does not exist"));
}

TEST_CASE("f32 checkpoints and a tied lm_head.weight are accepted", "[train][checkpoint]") {
  Setup s;
  const Checkpoint good = read_checkpoint(s.good);
  const TrainResult ref = train(s.resume_from(s.good), MPI_COMM_WORLD);
  Checkpoint tied = good;
  tied.tensors["lm_head.weight"] = good.tensors.at("transformer.wte.weight");
  const TrainResult r32 = train(s.resume_from(write_checkpoint("f32.h5", tied, DType::f32)), MPI_COMM_WORLD);
  CHECK(std::abs(r32.steps[0].loss - ref.steps[0].loss) <= 1e-6 * ref.steps[0].loss);
  const TrainResult r64 = train(s.resume_from(write_checkpoint("tied.h5", tied)), MPI_COMM_WORLD);
  CHECK(r64.steps[0].loss == ref.steps[0].loss);
}

TEST_CASE("bad token data is refused with a clear error on every rank", "[train][errors][data]") {
  Setup s;
  TokenData big = s.tokens;
  big.inputs[13] = static_cast<std::int32_t>(s.size.config.vocab);
  TrainConfig t = s.config();
  t.data = write_tokens("big.h5", big);
  CHECK_THROWS_WITH(train(t, MPI_COMM_WORLD), Catch::Contains("inputs[") && Catch::Contains("= 19 is outside the vocabulary [0, 19)"));

  TokenData few = s.tokens;
  few.rows = 2;
  few.inputs.resize(static_cast<std::size_t>(2 * few.seq));
  few.targets.resize(static_cast<std::size_t>(2 * few.seq));
  t.data = write_tokens("few.h5", few);
  CHECK_THROWS_WITH(train(t, MPI_COMM_WORLD),
                    Catch::Contains("has 2 rows; one global batch needs " + std::to_string(s.size.batch)));

  const std::string flat = path_of("flat.h5");
  run::run_on_root(MPI_COMM_WORLD, [&] {
    write_atomically(flat, [&](H5File& f) {
      f.write_int32("inputs", {static_cast<std::int64_t>(s.tokens.inputs.size())}, s.tokens.inputs);
      f.write_int32("targets", {static_cast<std::int64_t>(s.tokens.targets.size())}, s.tokens.targets);
    });
  });
  t = s.config();
  t.data = flat;
  CHECK_THROWS_WITH(train(t, MPI_COMM_WORLD), Catch::Contains("'inputs' has rank 1") && Catch::Contains("expected [N, T]"));

  const std::string reals = path_of("reals.h5");
  run::run_on_root(MPI_COMM_WORLD, [&] {
    write_atomically(reals, [&](H5File& f) {
      f.write_real("inputs", {s.tokens.rows, s.tokens.seq}, std::vector<double>(s.tokens.inputs.size(), 1.0), DType::f32);
      f.write_int32("targets", {s.tokens.rows, s.tokens.seq}, s.tokens.targets);
    });
  });
  t.data = reals;
  CHECK_THROWS_WITH(train(t, MPI_COMM_WORLD), Catch::Contains("'inputs' must hold integers"));

  t.data = path_of("no_such_tokens.h5");
  CHECK_THROWS_WITH(train(t, MPI_COMM_WORLD), Catch::Contains("token data file") && Catch::Contains("does not exist"));
}

TEST_CASE("an existing output file is never truncated by a failed run", "[train][errors][atomic]") {
  Setup s;
  const std::string precious = path_of("precious.h5");
  run::run_on_root(MPI_COMM_WORLD, [&] { std::filesystem::copy_file(s.good, precious, std::filesystem::copy_options::overwrite_existing); });
  const auto before = std::filesystem::file_size(precious);

  TrainConfig t = s.config();
  t.save = precious;
  t.data = path_of("missing-data.h5");
  CHECK_THROWS(train(t, MPI_COMM_WORLD));
  // A write that fails half-way leaves the old file and no temporary behind.
  CHECK_THROWS_WITH(run::run_on_root(MPI_COMM_WORLD, [&] {
                      write_atomically(precious, [](H5File& f) {
                        f.write_real("half", {2}, {1.0, 2.0}, DType::f64);
                        throw Error("disk full (simulated)");
                      });
                    }),
                    Catch::Contains("disk full (simulated)"));
  CHECK(std::filesystem::file_size(precious) == before);
  CHECK(read_checkpoint(precious).tensors.size() == read_checkpoint(s.good).tensors.size());
  std::size_t leftovers = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir()))
    leftovers += entry.path().filename().string().find(".tmp-") != std::string::npos;
  CHECK(leftovers == 0);
  // Every rank has listed the directory before rank 0 writes the next file (a temporary) into it.
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("a checkpoint that cannot be written fails on every rank with one message, under a pipeline and ZeRO-3",
          "[train][errors][checkpoint][zero]") {
  // The checkpoint is streamed one tensor at a time to world rank 0 (train/stage_gather.hpp); when
  // rank 0 cannot write, the other ranks (a second pipeline stage, dp peers) must still finish the
  // walk and throw the same error instead of waiting in the next gather.
  Setup s;
  const int world = world_size();
  TrainConfig t = s.config();
  if (world <= 8) {  // the model of 1–8 ranks: two stages where the world is even
    t.spec.layout.mode = TpMode::none;
    t.spec.layout.tp = 1;
    t.spec.layout.depth = 1;
    t.spec.layout.pp = world % 2 == 0 ? 2 : 1;
  }
  t.spec.zero.stage = 3;
  const std::string file = path_of("a-file"), directory = path_of("a-directory");
  run::run_on_root(MPI_COMM_WORLD, [&] {
    std::ofstream(file) << "a file, not a directory\n";
    std::filesystem::create_directories(directory);
  });

  // A checkpoint path that cannot be written is refused before the first step, on every rank: its
  // directory is a file, or the path is a directory (the atomic rename would fail after the run).
  t.save = file + "/z3.h5";
  CHECK_THROWS_WITH(train(t, MPI_COMM_WORLD), Catch::Contains("a-file/z3.h5") && Catch::Contains("not a directory"));
  t.save = directory;
  CHECK_THROWS_WITH(train(t, MPI_COMM_WORLD), Catch::Contains("is a directory") && Catch::Contains("a-directory"));
  CHECK(std::filesystem::is_directory(directory));
  std::size_t leftovers = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir()))
    leftovers += entry.path().filename().string().find(".tmp-") != std::string::npos;
  CHECK(leftovers == 0);
  // Every rank has listed the directory before rank 0 writes the next file (a temporary) into it.
  MPI_Barrier(MPI_COMM_WORLD);

  // And where it can write, the streamed checkpoint holds every tensor of the model once.
  t.save = path_of("z3-streamed.h5");
  train(t, MPI_COMM_WORLD);
  const Checkpoint written = read_checkpoint(t.save), reference = read_checkpoint(s.good);
  CHECK(written.tensors.size() == reference.tensors.size());
  for (const auto& [key, tensor] : reference.tensors) {
    INFO(key);
    REQUIRE(written.tensors.count(key) == 1);
    CHECK(written.tensors.at(key).first == tensor.first);
  }
}
