// The trainer (optimizers, clipping, checkpoints, token data, gradient dumps) through
// mdtp::train, in every mode of the world size, against the serial run every rank computes on
// MPI_COMM_SELF.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>

#include "support/gpt_harness.hpp"
#include "io/results_file.hpp"
#include "io/h5_file.hpp"
#include "run/root_task.hpp"
#include "io/token_data.hpp"
#include "train/trainer.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

// A directory shared by all ranks, created once.
// Random tokens in [0, vocab), 2.5 batches of rows (the data position wraps around).
std::string token_file(const ModelShape& config, std::int64_t batch) {
  const std::string path = shared_path("tokens.h5");
  run::run_on_root(MPI_COMM_WORLD, [&] {
    if (std::filesystem::exists(path)) return;
    const std::int64_t rows = batch * 5 / 2;
    TokenBatch b = random_batch(config, rows, 77);
    write_token_file(path, TokenData{rows, config.seq, b.inputs, b.targets, config.vocab, path});
  });
  return path;
}

TrainConfig base_config(const ModeCase& c, const ModelSize& size) {
  TrainConfig t;
  t.spec.layout.mode = c.mode;
  t.spec.layout.tp = c.config.tp;
  t.spec.layout.depth = c.config.tp_depth;
  t.spec.model = size.config;
  t.spec.global_batch = size.batch;
  t.steps = 10;
  t.spec.optimizer.kind = OptimizerKind::adamw;
  t.spec.optimizer.lr = 3e-2;
  t.spec.optimizer.grad_clip = 0.5;
  t.spec.precision = precision_for(DType::f64);
  t.data = token_file(size.config, size.batch);
  return t;
}

double curve_error(const std::vector<StepRecord>& got, const std::vector<StepRecord>& ref, std::size_t offset = 0) {
  double err = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i)
    err = std::max(err, std::abs(got[i].loss - ref[i + offset].loss) / std::abs(ref[i + offset].loss));
  return got.size() + offset <= ref.size() ? err : INFINITY;
}

bool same_file_contents(const std::string& a, const std::string& b) {
  H5File fa = H5File::open_read(a, "checkpoint"), fb = H5File::open_read(b, "checkpoint");
  for (const std::string& key : fa.children("/"))
    if (key != "optim" && fa.read_real(key) != fb.read_real(key)) return false;
  for (const char* group : {"optim/exp_avg", "optim/exp_avg_sq"})
    for (const std::string& key : fa.children(group))
      if (fa.read_real(std::string(group) + "/" + key) != fb.read_real(std::string(group) + "/" + key)) return false;
  return fa.int_attribute("optim", "step") == fb.int_attribute("optim", "step") &&
         fa.int_attribute("optim", "data_position") == fb.int_attribute("optim", "data_position");
}

}  // namespace

TEST_CASE("10 AdamW steps with clipping: the same loss curve in every mode; save, stop and resume", "[train][modes]") {
  const int world = world_size();
  const ModelSize size = model_size_for_world(world);
  TrainConfig serial = base_config(serial_case(), size);
  const TrainResult ref = train(serial, MPI_COMM_SELF);
  REQUIRE(ref.steps.size() == 10);
  bool clipped = false;
  for (const StepRecord& r : ref.steps) clipped = clipped || r.grad_norm > serial.spec.optimizer.grad_clip;
  CHECK(clipped);  // the clipping path is exercised
  CHECK(ref.steps.back().loss < ref.steps.front().loss);

  for (const ModeCase& c : model_cases_for_world(world)) {
    DYNAMIC_SECTION(c.label()) {
      const std::string tag = std::string(tp_mode_name(c.mode)) + "-" + std::to_string(c.config.tp);
      TrainConfig full = base_config(c, size);
      full.save = shared_path("full-" + tag + ".h5");
      const TrainResult a = train(full, MPI_COMM_WORLD);
      const double err = curve_error(a.steps, ref.steps);
      CHECK(err <= 1e-9);
      if (world_rank() == 0)
        std::cout << std::setprecision(10) << "[train] " << c.label() << " dp=" << a.spec.layout.dp << ": loss after 10 steps " << a.steps.back().loss
                  << " (serial " << ref.steps.back().loss << "), largest relative loss difference " << err << "\n";

      TrainConfig first = base_config(c, size);
      first.steps = 5;
      first.save = shared_path("half-" + tag + ".h5");
      train(first, MPI_COMM_WORLD);
      TrainConfig second = base_config(c, size);
      second.steps = 5;
      second.init_from = first.save;
      second.save = shared_path("resumed-" + tag + ".h5");
      const TrainResult b = train(second, MPI_COMM_WORLD);
      REQUIRE(b.steps.size() == 5);
      CHECK(b.steps.front().step == 6);
      for (std::size_t i = 0; i < 5; ++i) CHECK(b.steps[i].loss == a.steps[i + 5].loss);  // bitwise
      CHECK(same_file_contents(full.save, second.save));

      // The half-way checkpoint resumed serially (mode none) on every rank.
      TrainConfig other = serial;
      other.steps = 5;
      other.init_from = first.save;
      const TrainResult d = train(other, MPI_COMM_SELF);
      CHECK(curve_error(d.steps, ref.steps, 5) <= 1e-9);
    }
  }
}

TEST_CASE("the gradient dump holds the first step's gradients; the results file the run", "[train][dump]") {
  const int world = world_size();
  const ModelSize size = model_size_for_world(world);
  const ModeCase c = model_cases_for_world(world).front();
  TrainConfig t = base_config(c, size);
  t.steps = 2;
  t.dump_grads = shared_path("grads.h5");
  t.out = shared_path("results.h5");
  const TrainResult result = train(t, MPI_COMM_WORLD);
  // The results file: one /runs/<n>-train group with the loss curve and the per-step ledger.
  const std::vector<std::string> runs = list_runs(t.out);
  REQUIRE(runs.size() == 1);
  const Table steps = read_table(t.out, "/runs/" + runs[0] + "/steps");
  REQUIRE(steps.rows() == 2);
  CHECK(std::get<std::vector<double>>(steps.column("loss"))[1] == result.steps[1].loss);
  const Table ledger = read_table(t.out, "/runs/" + runs[0] + "/ledger");
  if (c.config.tp > 1) CHECK(ledger.rows() > 0);
  CHECK(std::get<std::string>(read_attributes(t.out, "/runs/" + runs[0]).at("mode")) == tp_mode_name(c.mode));
  // The first global batch is rows 0 .. batch-1 of the data.
  const TokenData data = read_token_file(t.data);
  const TokenRows rows = batch_rows(data, 0, 0, size.batch);
  GptRun serial(serial_case(), size.config, size.batch, MPI_COMM_SELF);
  serial.step(TokenBatch{rows.inputs, rows.targets});
  const ParamMap ref = serial.gather(true);
  H5File dump = H5File::open_read(t.dump_grads, "gradient dump");
  for (const ModelParam& p : serial.model->parameters()) {
    INFO(p.name());
    CHECK(dump.shape(p.name()) == p.checkpoint_shape());
    CHECK(relative_error(dump.read_real(p.name()), ref.at(p.name())) <= 1e-10);
  }
  CHECK(dump.int_attribute("/", "n_layer") == size.config.layers);
}

TEST_CASE("the set-up is held against the median step after the first", "[train]") {
  TrainResult r;
  CHECK(r.median_later_step_seconds() == 0.0);  // no step
  r.steps.push_back(StepRecord{1, 0.0, 0.0, 9.0, 0.0});
  CHECK(r.median_later_step_seconds() == 0.0);  // the first step only: it also pays first touches
  for (double s : {1.0, 3.0, 2.0}) r.steps.push_back(StepRecord{2, 0.0, 0.0, s, 0.0});
  CHECK(r.median_later_step_seconds() == 2.0);  // of 1, 3, 2; the first step's 9 left out
}
