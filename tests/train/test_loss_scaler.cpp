// The loss scaler (train/loss_scaler.hpp) against Megatron's DynamicGradScaler, step by step: the
// scale holds through the first hysteresis - 1 overflows and halves from then on (not below the
// minimum), doubles after `window` clean steps in a row (which also restore the hysteresis), and a
// fixed scale or a non-f16 run never changes.
#include <catch2/catch.hpp>

#include "train/loss_scaler.hpp"

using namespace mdtp;

namespace {

LossScaling config(int hysteresis, std::int64_t window = 3, double initial = 1024.0, double min = 64.0) {
  LossScaling c;
  c.initial = initial;
  c.min = min;
  c.window = window;
  c.hysteresis = hysteresis;
  return c;
}

}  // namespace

TEST_CASE("dynamic loss scale: hysteresis 2 holds the scale through one overflow", "[train][loss-scale]") {
  LossScaler s(DType::f16, config(2));
  CHECK(s.dynamic());
  CHECK(s.scale() == 1024.0);
  s.update(true);  // one overflow: the hysteresis absorbs it
  CHECK(s.scale() == 1024.0);
  s.update(true);  // the second halves
  CHECK(s.scale() == 512.0);
  s.update(true);  // and every further one until it grows again
  CHECK(s.scale() == 256.0);
  s.update(false);
  s.update(false);
  CHECK(s.scale() == 256.0);
  s.update(false);  // the window's third clean step doubles it and restores the hysteresis
  CHECK(s.scale() == 512.0);
  CHECK(s.state().hysteresis_tracker == 2);
  s.update(true);
  CHECK(s.scale() == 512.0);
  s.update(false);  // an overflow restarts the growth count
  s.update(false);
  CHECK(s.scale() == 512.0);
  CHECK(s.state().growth_tracker == 2);
}

TEST_CASE("dynamic loss scale: hysteresis 1 halves at the first overflow, never below the minimum",
          "[train][loss-scale]") {
  LossScaler s(DType::f16, config(1));
  s.update(true);
  CHECK(s.scale() == 512.0);
  for (int i = 0; i < 10; ++i) s.update(true);
  CHECK(s.scale() == 64.0);  // the floor
  LossScalerState saved = s.state();
  LossScaler restored(DType::f16, config(1));
  restored.restore(saved);
  CHECK(restored.state() == saved);
}

TEST_CASE("a fixed loss scale, and none outside f16", "[train][loss-scale]") {
  LossScaling fixed = config(2);
  fixed.fixed = 8.0;
  LossScaler f(DType::f16, fixed);
  CHECK(!f.dynamic());
  f.update(true);
  CHECK(f.scale() == 8.0);
  for (DType d : {DType::bf16, DType::f32, DType::f64}) {
    LossScaler n(d, config(2));
    CHECK(!n.dynamic());
    CHECK(n.scale() == 1.0);
    n.update(true);
    CHECK(n.scale() == 1.0);
  }
  // Megatron's defaults.
  const LossScaling d;
  CHECK(d.initial == 4294967296.0);
  CHECK(d.min == 1.0);
  CHECK(d.window == 1000);
  CHECK(d.hysteresis == 2);
}
