// Every ZeRO stage, with and without offload, against the unsharded optimizer (stage 0) in f64,
// in every case of zero_cases_for_world (tp = 1 with dp = 1 … 4; 1D, 1D-SP, 2D, 2.5D, 3D):
//  - without clipping, where ZeRO takes the same sums as the unsharded optimizer (dp ≤ 2 — a
//    two-rank sum is the same in either order — and no partial-sum group of more than one rank):
//    parameters and moments bit-identical after ten AdamW steps;
//  - otherwise one step from the same state: parameters ≤ 1e-13 (‖Δ‖∞/‖ref‖∞), the norm ≤ 1e-13;
//  - ten steps with clipping active: parameters and moments ≤ 1e-10.
// And stages 2–3 reducing after every micro-batch (ZeroConfig::reduce_per_micro_batch), three
// micro-batches per step, against stage 0 on the same micro-batches.  The shard sums the
// micro-batches after the dp sum, stage 0 before it: the first step's reduced gradients ≤ 1e-13,
// the norm ≤ 1e-13, ten clipped steps ≤ 1e-10.  The parameters after one plain step are printed,
// not bounded: AdamW's first update is lr·g/(|g| + ε) per element, so the last-bit difference of
// a nearly cancelling sum moves that element's whole step (measured 4e-13 to 2e-12).
// Values and moments are compared on each rank's TP shards (ZeroEngine::tp_shard; the norms are
// taken over every rank), which compares the full tensors without the TP gathers.
#include <catch2/catch.hpp>

#include <iostream>

#include "mesh/mesh.hpp"
#include "zero_harness.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {


struct Trajectory {
  ParamMap after_one, last, exp_avg, exp_avg_sq;
  ParamMap first_grads;  // the first step's reduced gradients (with several micro-batches)
  double first_norm = 0.0;
};

// `micro_batches` > 1: each step runs that many batches through the model before the update.
Trajectory run(const GptRun& base, const ParamMap& start, const ZeroConfig& zero, const OptimizerSpec& opt, int steps,
               int micro_batches = 1) {
  ZeroRun r(base, start, zero, opt);
  Trajectory t;
  for (int s = 0; s < steps; ++s) {
    std::vector<TokenBatch> batches;
    for (int i = 0; i < micro_batches; ++i) batches.push_back(step_batch(base, s * micro_batches + i));
    double norm = 0.0;
    if (micro_batches == 1) {
      norm = r.step(batches.front());
    } else {
      r.accumulate(batches);
      if (s == 0) t.first_grads = r.local(ZeroTensor::grad);
      norm = r.engine->step();
    }
    if (s == 0) {
      t.first_norm = norm;
      t.after_one = r.local();
    }
  }
  t.last = r.local();
  t.exp_avg = r.local(ZeroTensor::exp_avg);
  t.exp_avg_sq = r.local(ZeroTensor::exp_avg_sq);
  return t;
}

double moments_error(const Trajectory& got, const Trajectory& ref) {
  return std::max(max_relative_error_all(got.exp_avg, ref.exp_avg), max_relative_error_all(got.exp_avg_sq, ref.exp_avg_sq));
}

}  // namespace

TEST_CASE("every ZeRO stage, with and without offload, equals the unsharded optimizer", "[zero][parity]") {
  for (const ModeCase& c : zero_cases_for_world(world_size())) {
    DYNAMIC_SECTION(c.label()) {
      GptRun base(c, zero_model(), kReplicaBatch * (c.config.world / c.config.tp));
      const int dp = base.mesh->comm("dp").size();
      const ParamMap start = random_parameters(base, 7);
      const bool exact = same_sums(base);
      const int plain_steps = exact ? 10 : 1;
      const OptimizerSpec plain = test_adamw(), clipped = test_adamw(0.05);
      const Trajectory ref = run(base, start, ZeroConfig{}, plain, plain_steps);
      const Trajectory ref_clipped = run(base, start, ZeroConfig{}, clipped, 10);
      for (int stage = 1; stage <= 3; ++stage)
        for (bool offload : {false, true}) {
          ZeroConfig zero;
          zero.stage = stage;
          zero.offload = offload;
          zero.bucket_mb = 0.01;  // several buckets per kind
          const Trajectory got = run(base, start, zero, plain, plain_steps);
          const Trajectory got_clipped = run(base, start, zero, clipped, 10);
          const double one = max_relative_error_all(got.after_one, ref.after_one);
          const double norm = std::abs(got.first_norm - ref.first_norm) / ref.first_norm;
          const bool identical = bit_identical_all(got.last, ref.last) && bit_identical_all(got.exp_avg, ref.exp_avg) &&
                                 bit_identical_all(got.exp_avg_sq, ref.exp_avg_sq);
          const double ten = max_relative_error_all(got_clipped.last, ref_clipped.last);
          const double moments = moments_error(got_clipped, ref_clipped);
          if (world_rank() == 0)
            std::cout << "[zero parity] " << c.label() << " dp=" << dp << " stage=" << stage << " offload=" << offload
                      << ": step 1 " << one << ", norm " << norm << ", " << plain_steps << " steps bit-identical "
                      << identical << "; 10 clipped steps " << ten << ", moments " << moments << "\n";
          INFO("stage " << stage << " offload " << offload);
          CHECK(one <= 1e-13);
          CHECK(norm <= 1e-13);
          if (exact) CHECK(identical);
          CHECK(ten <= 1e-10);
          CHECK(moments <= 1e-10);
        }
    }
  }
}

TEST_CASE("ZeRO-2/3 reducing after every micro-batch equal the unsharded optimizer", "[zero][parity]") {
  constexpr int m = 3;
  for (const ModeCase& c : zero_cases_for_world(world_size())) {
    DYNAMIC_SECTION(c.label()) {
      GptRun base(c, zero_model(), kReplicaBatch * (c.config.world / c.config.tp));
      const ParamMap start = random_parameters(base, 7);
      const OptimizerSpec plain = test_adamw(), clipped = test_adamw(0.05);
      const Trajectory ref = run(base, start, ZeroConfig{}, plain, 1, m);
      const Trajectory ref_clipped = run(base, start, ZeroConfig{}, clipped, 10, m);
      for (int stage = 2; stage <= 3; ++stage) {
        ZeroConfig zero;
        zero.stage = stage;
        zero.reduce_per_micro_batch = true;
        zero.bucket_mb = 0.01;
        const Trajectory got = run(base, start, zero, plain, 1, m);
        const Trajectory got_clipped = run(base, start, zero, clipped, 10, m);
        const double grads = max_relative_error_all(got.first_grads, ref.first_grads);
        const double one = max_relative_error_all(got.after_one, ref.after_one);
        const double norm = std::abs(got.first_norm - ref.first_norm) / ref.first_norm;
        const double ten = max_relative_error_all(got_clipped.last, ref_clipped.last);
        const double moments = moments_error(got_clipped, ref_clipped);
        if (world_rank() == 0)
          std::cout << "[zero parity] " << c.label() << " stage=" << stage << " per micro-batch, m=" << m
                    << ": gradients " << grads << ", step 1 " << one << ", norm " << norm << "; 10 clipped steps "
                    << ten << ", moments " << moments << "\n";
        INFO("stage " << stage << " per micro-batch");
        CHECK(grads <= 1e-13);
        CHECK(norm <= 1e-13);
        CHECK(ten <= 1e-10);
        CHECK(moments <= 1e-10);
      }
    }
  }
}
