// `mdtp train --dtype bf16` (mixed precision: bf16 parameters and activations, f32 gradients, f32
// master weights and moments) in every TP mode, with a pipeline and ZeRO-3:
//  - the first step's loss and every reduced gradient (--dump-grads) against the f64 serial run
//    and against mode none at bf16: per tensor ‖Δ‖∞/‖ref‖∞ ≤ 2e-2;
//  - three steps' checkpoints (f32 masters) against mode none at bf16 within 2e-2;
//  - the bf16 gradients are not the f32 run's;
//  - a bf16 checkpoint resumes bit for bit (1 + 1 steps against 2), and an f32 checkpoint loads
//    into a bf16 run and back.
// And f16 with dynamic loss scaling (train/loss_scaler.hpp).  Rank counts: 2, 4 and 8.
#include <catch2/catch.hpp>

#include <cmath>
#include <iostream>

#include "file_error.hpp"
#include "support/gpt_harness.hpp"
#include "io/h5_file.hpp"
#include "train/loss_scaler.hpp"
#include "train/trainer.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

struct Bf16Case {
  std::string label;
  TpMode mode = TpMode::none;
  int tp = 1, depth = 1, pp = 1;
  ScheduleKind schedule = ScheduleKind::one_f_one_b;
  int micro_batches = 1, zero = 0;
};

std::vector<Bf16Case> cases_for(int world) {
  switch (world) {
    case 2:
      return {{"1d tp2", TpMode::d1, 2}, {"1d-sp tp2", TpMode::d1_sp, 2}, {"none dp2 zero1", TpMode::none, 1, 1, 1,
                                                                             ScheduleKind::one_f_one_b, 1, 1}};
    case 4:
      return {{"2d tp4", TpMode::d2, 4}, {"2.5d tp4 d1", TpMode::d2p5, 4},
              {"none pp2 1f1b m2 dp2 zero3", TpMode::none, 1, 1, 2, ScheduleKind::one_f_one_b, 2, 3}};
    case 8:
      return {{"2.5d tp8 d2", TpMode::d2p5, 8, 2}, {"3d tp8", TpMode::d3, 8},
              {"1d tp2 pp2 zb-h1 m2 dp2 zero3", TpMode::d1, 2, 1, 2, ScheduleKind::zb_h1, 2, 3}};
    default: return {};
  }
}

TrainConfig base_config(DType dtype) {
  TrainConfig t;
  t.spec.model = ModelShape{2, 32, 4, 16, 0};  // the shipped corpus's vocabulary
  t.spec.global_batch = 8;
  t.steps = 1;
  t.spec.optimizer.lr = 1e-2;
  t.spec.precision = precision_for(dtype);
  t.spec.seed = 31;
  return t;
}

TrainConfig config_for(const Bf16Case& c, DType dtype) {
  TrainConfig t = base_config(dtype);
  t.spec.layout.mode = c.mode;
  t.spec.layout.tp = c.tp;
  t.spec.layout.depth = c.depth;
  t.spec.layout.pp = c.pp;
  t.spec.layout.schedule = c.schedule;
  t.spec.layout.micro_batches = c.micro_batches;
  t.spec.zero.stage = c.zero;
  return t;
}

// A run's first loss; the gradients and the checkpoint go to files named by `tag`.
double run(TrainConfig t, const std::string& tag, MPI_Comm comm = MPI_COMM_WORLD) {
  t.dump_grads = shared_path(tag + "-grads.h5");
  t.save = shared_path(tag + "-params.h5");
  const TrainResult r = train(t, comm);
  if (comm == MPI_COMM_WORLD) MPI_Barrier(MPI_COMM_WORLD);  // the files are complete for every rank
  return r.steps.empty() ? 0.0 : r.steps.front().loss;
}

// The serial references on world rank 0 (mode none on MPI_COMM_SELF), shared with every rank.
struct References {
  double loss_f64 = 0.0, loss_bf16 = 0.0;
};
References serial_references(int steps) {
  References r;
  // shared_path is collective (the directory is made once for all ranks): every rank names the
  // files first.
  for (const char* tag : {"bf16-ref-f64", "bf16-ref-bf16", "bf16-ref-f32"})
    for (const char* part : {"-grads.h5", "-params.h5"}) shared_path(std::string(tag) + part);
  if (world_rank() == 0) {
    TrainConfig f64 = base_config(DType::f64), bf16 = base_config(DType::bf16), f32 = base_config(DType::f32);
    f64.steps = bf16.steps = f32.steps = steps;
    f64.spec.layout.dp = bf16.spec.layout.dp = f32.spec.layout.dp = 1;
    r.loss_f64 = run(f64, "bf16-ref-f64", MPI_COMM_SELF);
    r.loss_bf16 = run(bf16, "bf16-ref-bf16", MPI_COMM_SELF);
    run(f32, "bf16-ref-f32", MPI_COMM_SELF);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  double losses[2] = {r.loss_f64, r.loss_bf16};
  MPI_Bcast(losses, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return {losses[0], losses[1]};
}

}  // namespace

TEST_CASE("bf16 training: the first step against f64, and every mode against mode none at bf16", "[train][bf16]") {
  const References ref = serial_references(1);
  const std::string f64_grads = shared_path("bf16-ref-f64-grads.h5"), bf16_grads = shared_path("bf16-ref-bf16-grads.h5");
  // The serial bf16 run itself against f64, and against the f32 run (not bit-equal).
  const TensorError serial = worst_tensor_error(bf16_grads, f64_grads);
  CHECK(serial.error <= 2e-2);
  CHECK(std::abs(ref.loss_bf16 - ref.loss_f64) <= 2e-2 * std::abs(ref.loss_f64));
  CHECK(worst_tensor_error(bf16_grads, shared_path("bf16-ref-f32-grads.h5")).error > 0.0);
  if (world_rank() == 0)
    std::cout << "[train bf16] serial: loss " << ref.loss_bf16 << " (f64 " << ref.loss_f64 << "), gradients "
              << serial.error << " (" << serial.tensor << ") from f64\n";
  for (const Bf16Case& c : cases_for(world_size())) {
    DYNAMIC_SECTION(c.label) {
      const double loss = run(config_for(c, DType::bf16), "bf16-" + c.label);
      const TensorError vs_none = worst_tensor_error(shared_path("bf16-" + c.label + "-grads.h5"), bf16_grads);
      const TensorError vs_f64 = worst_tensor_error(shared_path("bf16-" + c.label + "-grads.h5"), f64_grads);
      if (world_rank() == 0)
        std::cout << "[train bf16] " << c.label << ": loss " << loss << ", gradients " << vs_none.error << " ("
                  << vs_none.tensor << ") from mode none at bf16, " << vs_f64.error << " (" << vs_f64.tensor
                  << ") from f64\n";
      CHECK(std::abs(loss - ref.loss_f64) <= 2e-2 * std::abs(ref.loss_f64));
      CHECK(vs_none.error <= 2e-2);
      CHECK(vs_f64.error <= 2e-2);
    }
  }
}

TEST_CASE("bf16 checkpoints: masters resume bit for bit, and load across precisions", "[train][bf16][checkpoint]") {
  const Bf16Case c = cases_for(world_size()).front();
  TrainConfig t = config_for(c, DType::bf16);
  t.steps = 2;
  const std::string straight = "bf16-ckpt-" + c.label + "-straight";
  run(t, straight);
  t.steps = 1;
  run(t, "bf16-ckpt-" + c.label + "-half");
  TrainConfig resumed = t;
  resumed.init_from = shared_path("bf16-ckpt-" + c.label + "-half-params.h5");
  resumed.save = shared_path("bf16-ckpt-" + c.label + "-resumed-params.h5");
  train(resumed, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  // The checkpoint holds the f32 masters and moments: the resumed run is the straight one, bitwise.
  CHECK(file_error(resumed.save, shared_path(straight + "-params.h5")) == 0.0);
  // An f32 checkpoint into a bf16 run (masters = the f32 weights, parameters rounded from them), and
  // the bf16 run's checkpoint back into f32: both run a step.
  TrainConfig f32 = config_for(c, DType::f32);
  run(f32, "bf16-ckpt-" + c.label + "-f32");
  TrainConfig into_bf16 = t;
  into_bf16.init_from = shared_path("bf16-ckpt-" + c.label + "-f32-params.h5");
  into_bf16.save = shared_path("bf16-ckpt-" + c.label + "-from-f32.h5");
  const TrainResult a = train(into_bf16, MPI_COMM_WORLD);
  TrainConfig into_f32 = f32;
  into_f32.init_from = resumed.save;
  const TrainResult b = train(into_f32, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(a.steps.size() == 1);
  CHECK(b.steps.size() == 1);
  CHECK(std::isfinite(a.steps.front().loss));
  CHECK(std::isfinite(b.steps.front().loss));
}

// f16 with dynamic loss scaling (Megatron's DynamicGradScaler): from the default 2^32 the first
// steps overflow (f16's largest value is 65504) and are skipped while the scale backs off; a short
// window then grows it until it overflows again mid-run.  Every step's scale must follow the rule
// from the run's own overflows (LossScaler replayed), the overflows be skipped and counted, nothing
// non-finite reach the masters, and a checkpoint carry the scaler so that a resumed run is the
// straight one bit for bit.
TEST_CASE("f16 with dynamic loss scaling: overflows skipped, the scale as specified, resumed bitwise",
          "[train][f16][loss-scale]") {
  const Bf16Case c = cases_for(world_size()).front();
  for (int hysteresis : {1, 2}) {
    DYNAMIC_SECTION("hysteresis " << hysteresis) {
      TrainConfig t = config_for(c, DType::f16);
      t.steps = 24;
      t.spec.precision.loss_scaling.window = 3;
      t.spec.precision.loss_scaling.hysteresis = hysteresis;
      const std::string tag = "f16-" + c.label + "-h" + std::to_string(hysteresis);
      t.save = shared_path(tag + "-straight.h5");
      const TrainResult r = train(t, MPI_COMM_WORLD);
      MPI_Barrier(MPI_COMM_WORLD);
      REQUIRE(r.steps.size() == 24);
      LossScaler replay(DType::f16, t.spec.precision.loss_scaling);
      std::int64_t overflows = 0, after_clean = 0;
      bool clean_seen = false;
      for (const StepRecord& s : r.steps) {
        INFO("step " << s.step << " scale " << s.loss_scale << (s.overflow ? " overflow" : ""));
        CHECK(s.loss_scale == replay.scale());
        CHECK(s.overflow == !std::isfinite(s.grad_norm));
        CHECK(std::isfinite(s.loss));
        replay.update(s.overflow);
        overflows += s.overflow;
        if (s.overflow && clean_seen) ++after_clean;
        clean_seen = clean_seen || !s.overflow;
      }
      CHECK(r.overflow_steps == overflows);
      CHECK(r.steps.front().overflow);  // 2^32 overflows at once
      // Hysteresis 2 absorbs the first overflow; hysteresis 1 halves at it.
      CHECK(r.steps[1].loss_scale == (hysteresis == 2 ? r.steps[0].loss_scale : r.steps[0].loss_scale / 2));
      CHECK(after_clean >= 1);  // an overflow after growth, mid-run
      CHECK(r.state.loss_scaler == replay.state());
      // The masters stayed finite through every overflow.
      const H5File saved = H5File::open_read(t.save, "test");
      for (const std::string& key : saved.children("/"))
        if (key != "optim")
          for (double v : saved.read_real(key)) REQUIRE(std::isfinite(v));
      // 12 steps, then 12 more from the checkpoint: the scaler's state travels with it.
      TrainConfig half = t;
      half.steps = 12;
      half.save = shared_path(tag + "-half.h5");
      train(half, MPI_COMM_WORLD);
      TrainConfig rest = half;
      rest.init_from = half.save;
      rest.save = shared_path(tag + "-resumed.h5");
      const TrainResult resumed = train(rest, MPI_COMM_WORLD);
      MPI_Barrier(MPI_COMM_WORLD);
      REQUIRE(resumed.steps.size() == 12);
      for (std::size_t i = 0; i < 12; ++i) CHECK(resumed.steps[i].loss_scale == r.steps[12 + i].loss_scale);
      CHECK(file_error(rest.save, t.save) == 0.0);
    }
  }
  // A fixed scale: --loss-scale 1 runs unscaled, and nothing is treated as an overflow.
  TrainConfig fixed = config_for(c, DType::f16);
  fixed.steps = 3;
  fixed.spec.precision.loss_scaling.fixed = 1.0;
  const TrainResult f = train(fixed, MPI_COMM_WORLD);
  for (const StepRecord& s : f.steps) {
    CHECK(s.loss_scale == 1.0);
    CHECK(!s.overflow);
  }
}
