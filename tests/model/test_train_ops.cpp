// The GPT kernels (host implementation) and the Optimizer, against
// direct float64 formulas: embedding lookup/scatter-add, vocabulary-split cross-entropy pieces
// with padding, AdamW (PyTorch semantics), clipping and weight decay on 2+-D parameters only.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "gpt_harness.hpp"
#include "model/gpt_kernels.hpp"
#include "zero/optimizer.hpp"

using namespace mdtp;
using namespace mdtp::testing;

TEST_CASE("embedding lookup zeroes ids outside the slice and scatter-add accumulates repeats", "[train][ops]") {
  auto be = make_host_backend();
  auto kernels = make_host_gpt_kernels(*be);
  for (DType dt : {DType::f64, DType::f32}) {
    // Rows 3..5 of a table whose row r, column j holds 10r + j.
    Tensor table = be->from_f64({30, 31, 40, 41, 50, 51}, {3, 2}, dt, MemCategory::other);
    const std::vector<std::int32_t> ids{4, 1, 3, 4, 6};
    Tensor out = be->empty({5, 2}, dt, MemCategory::other);
    kernels->embedding_forward(table, ids, 3, out);
    CHECK(be->to_f64(out) == std::vector<double>{40, 41, 0, 0, 30, 31, 40, 41, 0, 0});
    Tensor grad = be->zeros({3, 2}, dt, MemCategory::other);
    Tensor dy = be->from_f64({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {5, 2}, dt, MemCategory::other);
    kernels->embedding_backward(dy, ids, 3, grad);
    CHECK(be->to_f64(grad) == std::vector<double>{5, 6, 1 + 7, 2 + 8, 0, 0});
  }
}

TEST_CASE("cross-entropy pieces treat padded columns as -inf", "[train][ops]") {
  auto be = make_host_backend();
  auto kernels = make_host_gpt_kernels(*be);
  // Two rows of a slice holding vocabulary entries 4..7 of which 4..5 are real (6, 7 padding).
  const std::vector<double> l{0.5, -1.0, 9.0, 9.0, 2.0, 1.5, 9.0, 9.0};
  const std::vector<std::int32_t> targets{5, 2};  // row 1's target lies in another slice
  Tensor logits = be->from_f64(l, {2, 4}, DType::f64, MemCategory::other);
  Tensor mx = be->empty({2}, DType::f64, MemCategory::other);
  kernels->xent_row_max(logits, 2, mx);
  CHECK(be->to_f64(mx) == std::vector<double>{0.5, 2.0});
  Tensor sums = be->empty({2, 2}, DType::f64, MemCategory::other);
  kernels->xent_partial_sums(logits, 2, mx, targets, 4, sums);
  const std::vector<double> s = be->to_f64(sums);
  CHECK(s[0] == Approx(1.0 + std::exp(-1.5)).epsilon(1e-15));
  CHECK(s[1] == -1.0);
  CHECK(s[3] == 0.0);
  const double lse0 = 0.5 + std::log(s[0]), lse1 = 2.0 + std::log(s[2]);
  Tensor lse = be->from_f64({lse0, lse1}, {2}, DType::f64, MemCategory::other);
  Tensor d = be->empty({2, 4}, DType::f64, MemCategory::other);
  kernels->xent_backward(logits, 2, lse, targets, 4, 0.5, d);
  const std::vector<double> g = be->to_f64(d);
  CHECK(g[0] == Approx(0.5 * std::exp(0.5 - lse0)).epsilon(1e-15));
  CHECK(g[1] == Approx(0.5 * (std::exp(-1.0 - lse0) - 1.0)).epsilon(1e-15));
  CHECK(g[2] == 0.0);
  CHECK(g[3] == 0.0);
  CHECK(g[5] == Approx(0.5 * std::exp(1.5 - lse1)).epsilon(1e-15));
  // A slice with no real column: max -inf, nothing summed.
  kernels->xent_row_max(logits, 0, mx);
  CHECK(be->to_f64(mx)[0] == -std::numeric_limits<double>::infinity());
}

TEST_CASE("the optimizer follows PyTorch AdamW with clipping and decays only 2+-D parameters", "[train][optimizer]") {
  const ModelSize size = model_size_for_world(1);
  GptRun run(serial_case(), size.config, 2, MPI_COMM_SELF);
  OptimizerConfig oc;
  oc.lr = 0.01;
  oc.grad_clip = 0.05;
  Optimizer opt(oc, run.model->parameters(), *run.mesh, *run.backend);
  std::vector<std::vector<double>> w, m, v;
  for (const ModelParam& p : run.model->parameters()) {
    w.push_back(run.backend->to_f64(p.param->value));
    m.emplace_back(w.back().size(), 0.0);
    v.emplace_back(w.back().size(), 0.0);
  }
  for (int step = 1; step <= 3; ++step) {
    const TokenBatch batch = random_batch(size.config, 2, 40 + step);
    run.model->zero_gradients();
    run.model->forward_backward(batch.inputs, batch.targets);
    double sq = 0.0;
    for (const ModelParam& p : run.model->parameters())
      for (double x : run.backend->to_f64(p.param->grad)) sq += x * x;
    const double norm = std::sqrt(sq), c = std::min(1.0, oc.grad_clip / (norm + 1e-6));
    CHECK(opt.step() == Approx(norm).epsilon(1e-12));
    CHECK(c < 1.0);
    const double bc1 = 1 - std::pow(0.9, step), bc2 = 1 - std::pow(0.95, step);
    std::size_t i = 0;
    for (const ModelParam& p : run.model->parameters()) {
      const std::vector<double> g = run.backend->to_f64(p.param->grad);
      const double wd = p.param->full_shape.size() >= 2 ? 0.1 : 0.0;
      CHECK(p.param->decays == (wd > 0));
      for (std::size_t k = 0; k < g.size(); ++k) {
        const double gk = g[k] * c;
        w[i][k] *= 1 - oc.lr * wd;
        m[i][k] = 0.9 * m[i][k] + 0.1 * gk;
        v[i][k] = 0.95 * v[i][k] + 0.05 * gk * gk;
        w[i][k] -= oc.lr / bc1 * m[i][k] / (std::sqrt(v[i][k]) / std::sqrt(bc2) + 1e-8);
      }
      INFO(p.name() << " after step " << step);
      CHECK(relative_error(run.backend->to_f64(p.param->value), w[i]) <= 1e-13);
      ++i;
    }
  }
  CHECK(opt.step_count() == 3);
  OptimizerConfig bad;
  bad.kind = "adam";
  CHECK_THROWS_WITH(Optimizer(bad, run.model->parameters(), *run.mesh, *run.backend),
                    Catch::Contains("unknown optimizer 'adam'"));
}
