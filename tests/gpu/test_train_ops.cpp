// The training ops of src/cuda/train_ops.hpp against direct float64 loops (the host backend
// has no such ops yet): softmax (plain, causal, backward), cross-entropy, AdamW.
#include <catch2/catch.hpp>
#include <cmath>

#include "cuda/train_ops.hpp"
#include "gpu/gpu_test_support.hpp"
#include "gpu/reference_ops.hpp"

using namespace mdtp;
using namespace mdtp::gpu_test;

TEST_CASE("train ops: row softmax, causal and backward", "[gpu][train]") {
  auto dev = make_cuda_backend();
  for (DType dt : {DType::f64, DType::f32}) {
    INFO(dtype_name(dt));
    // [batch=2, heads=3, Tq=5, Tk=7] scores; and Tq > Tk, where the first rows are fully masked.
    for (Shape shape : {Shape{2, 3, 5, 7}, Shape{2, 6, 4}}) {
      const std::int64_t rows = shape_numel(shape) / shape.back(), cols = shape.back();
      auto xv = random_values(static_cast<std::size_t>(shape_numel(shape)), 70, -3.0, 3.0);
      Tensor x = dev->from_f64(xv, shape, dt, MemCategory::activations);
      Tensor y = dev->empty(shape, dt, MemCategory::activations);
      softmax_rows(*dev, x, y, false);
      CHECK(rel_inf(dev->to_f64(y), softmax_ref(xv, rows, cols, 0)) <= tolerance(dt));
      softmax_rows(*dev, x, y, true);
      auto ref = softmax_ref(xv, rows, cols, shape[shape.size() - 2]);
      CHECK(rel_inf(dev->to_f64(y), ref) <= tolerance(dt));

      auto dyv = random_values(xv.size(), 71);
      Tensor dy = dev->from_f64(dyv, shape, dt, MemCategory::activations);
      Tensor dx = dev->empty(shape, dt, MemCategory::activations);
      softmax_rows_backward(*dev, y, dy, dx);
      CHECK(rel_inf(dev->to_f64(dx), softmax_backward_ref(ref, dyv, rows, cols)) <= tolerance(dt));
    }
  }
}

TEST_CASE("train ops: cross-entropy forward and backward", "[gpu][train]") {
  auto dev = make_cuda_backend();
  const std::int64_t rows = 11, vocab = 301;
  std::vector<std::int32_t> targets(rows);
  for (std::int64_t i = 0; i < rows; ++i) targets[i] = static_cast<std::int32_t>((i * 37) % vocab);
  targets[3] = -1;  // ignored
  DeviceIndices t = upload_indices(*dev, targets);
  CHECK(t.size() == rows);
  for (DType dt : {DType::f64, DType::f32}) {
    INFO(dtype_name(dt));
    auto lv = random_values(rows * vocab, 80, -4.0, 4.0);
    Tensor logits = dev->from_f64(lv, {rows, vocab}, dt, MemCategory::activations);
    Tensor losses = dev->empty({rows}, DType::f64, MemCategory::activations);
    Tensor lse = dev->empty({rows}, DType::f64, MemCategory::activations);
    cross_entropy_forward(*dev, logits, t, losses, lse);
    const double scale = 1.0 / (rows - 1);
    // The reference sees the logits as stored.
    const CrossEntropyRef ref = cross_entropy_ref(dev->to_f64(logits), targets, vocab, scale);
    CHECK(rel_inf(dev->to_f64(lse), ref.lse) <= tolerance(dt));
    CHECK(rel_inf(dev->to_f64(losses), ref.loss) <= tolerance(dt));
    cross_entropy_backward(*dev, logits, t, lse, scale, logits);  // in place
    CHECK(rel_inf(dev->to_f64(logits), ref.dlogits) <= tolerance(dt));
  }
  Tensor logits = dev->zeros({rows + 1, vocab}, DType::f32, MemCategory::activations);
  Tensor losses = dev->empty({rows + 1}, DType::f64, MemCategory::activations);
  CHECK_THROWS_WITH(cross_entropy_forward(*dev, logits, t, losses, losses), Catch::Contains("11 targets for 12 rows"));
}

TEST_CASE("train ops: AdamW with and without master weights", "[gpu][train]") {
  auto dev = make_cuda_backend();
  const std::int64_t n = 257;
  AdamWStep cfg;
  cfg.lr = 1e-2;
  cfg.weight_decay = 0.1;
  cfg.grad_scale = 0.5;
  auto w0 = random_values(n, 90);
  // The reference: PyTorch's AdamW in float64, from w0 as the update reads it (in the state's
  // dtype: the f32 master weights of a bf16 parameter).
  auto reference = [&](DType stored, const std::vector<std::vector<double>>& grads) {
    std::vector<double> w = as_stored(w0, stored), m(n, 0.0), v(n, 0.0);
    adamw_ref(cfg, 1, grads, w, m, v);
    return w;
  };
  std::vector<std::vector<double>> grads;
  for (int s = 0; s < 3; ++s) grads.push_back(random_values(n, 91 + s));

  for (DType dt : {DType::f64, DType::f32, DType::bf16}) {
    INFO(dtype_name(dt));
    const DType state = dt == DType::bf16 ? DType::f32 : dt;
    Tensor param = dev->from_f64(w0, {n}, dt, MemCategory::parameters);
    Tensor master = dt == DType::bf16 ? dev->from_f64(w0, {n}, state, MemCategory::optimizer_state) : Tensor();
    Tensor m = dev->zeros({n}, state, MemCategory::optimizer_state);
    Tensor v = dev->zeros({n}, state, MemCategory::optimizer_state);
    std::vector<std::vector<double>> used;
    for (int s = 1; s <= 3; ++s) {
      Tensor g = dev->from_f64(grads[s - 1], {n}, dt, MemCategory::gradients);
      used.push_back(dev->to_f64(g));  // as rounded to the grad's dtype
      cfg.step = s;
      adamw_update(*dev, param, g, master, m, v, cfg);
    }
    auto ref = reference(state, used);
    if (dt == DType::bf16) {
      CHECK(rel_inf(dev->to_f64(master), ref) <= 1e-5);
      CHECK(rel_inf(dev->to_f64(param), ref) <= 1e-2);
    } else {
      CHECK(rel_inf(dev->to_f64(param), ref) <= tolerance(dt));
    }
  }
  Tensor p16 = dev->zeros({n}, DType::bf16, MemCategory::parameters);
  Tensor none;
  Tensor m32 = dev->zeros({n}, DType::f32, MemCategory::optimizer_state);
  cfg.step = 1;
  CHECK_THROWS_WITH(adamw_update(*dev, p16, p16, none, m32, m32, cfg), Catch::Contains("needs f32 master weights"));
  // f16 moments lose v = (1-beta2)·g² for small gradients: refused, naming the tensor and dtype.
  Tensor h16 = dev->zeros({n}, DType::f16, MemCategory::parameters);
  Tensor master32 = dev->zeros({n}, DType::f32, MemCategory::optimizer_state);
  Tensor m16 = dev->zeros({n}, DType::f16, MemCategory::optimizer_state);
  CHECK_THROWS_WITH(adamw_update(*dev, h16, h16, master32, m16, m32, cfg),
                    Catch::Contains("adamw m is f16") && Catch::Contains("loses the second moment"));
  CHECK_THROWS_WITH(adamw_update(*dev, h16, h16, master32, m32, m16, cfg), Catch::Contains("adamw v is f16"));
  // The Backend's same-dtype update has no master weights: an f16 parameter is refused there too.
  CHECK_THROWS_WITH(dev->adamw_update(h16, h16, m16, m16, cfg), Catch::Contains("needs f32 or f64; got f16"));
}
