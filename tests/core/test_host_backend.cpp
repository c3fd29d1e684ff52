// The host backend against direct float64 loops, on non-square shapes, in f64 and f32.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "core/backend.hpp"
#include "test_values.hpp"

using namespace mdtp;
using mdtp::testing::random_values;
using mdtp::testing::rel_inf;

TEST_CASE("gemm with every transpose combination", "[core][gemm]") {
  auto be = make_host_backend();
  const std::int64_t m = 7, k = 5, n = 3;
  for (DType dt : {DType::f64, DType::f32}) {
    double tol = dt == DType::f64 ? 1e-14 : 1e-6;
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        auto av = random_values(m * k, 1), bv = random_values(k * n, 2), cv = random_values(m * n, 3);
        Tensor a = be->from_f64(av, ta ? Shape{k, m} : Shape{m, k}, dt, MemCategory::other);
        Tensor b = be->from_f64(bv, tb ? Shape{n, k} : Shape{k, n}, dt, MemCategory::other);
        Tensor c = be->from_f64(cv, {m, n}, dt, MemCategory::other);
        be->gemm(ta, tb, 0.5, a, b, 2.0, c);
        std::vector<double> ref(m * n);
        for (std::int64_t i = 0; i < m; ++i)
          for (std::int64_t j = 0; j < n; ++j) {
            double s = 0.0;
            for (std::int64_t p = 0; p < k; ++p)
              s += (ta ? av[p * m + i] : av[i * k + p]) * (tb ? bv[j * k + p] : bv[p * n + j]);
            ref[i * n + j] = 0.5 * s + 2.0 * cv[i * n + j];
          }
        CHECK(rel_inf(be->to_f64(c), ref) <= tol);
      }
  }
  Tensor a = be->zeros({3, 4}, DType::f64, MemCategory::other);
  Tensor b = be->zeros({5, 2}, DType::f64, MemCategory::other);
  Tensor c = be->zeros({3, 2}, DType::f64, MemCategory::other);
  CHECK_THROWS_WITH(be->gemm(false, false, 1, a, b, 0, c), Catch::Contains("op(A) is 3x4, op(B) is 5x2"));
}

TEST_CASE("elementwise, bias and reductions", "[core]") {
  auto be = make_host_backend();
  auto xv = random_values(6 * 4, 7), rv = random_values(4, 8);
  Tensor x = be->from_f64(xv, {6, 4}, DType::f64, MemCategory::other);
  Tensor row = be->from_f64(rv, {4}, DType::f64, MemCategory::other);
  be->add_row_vector(x, row);
  Tensor sums = be->from_f64({1, 1, 1, 1}, {4}, DType::f64, MemCategory::other);
  be->column_sums(x, sums, 3.0);
  auto got = be->to_f64(sums);
  for (int j = 0; j < 4; ++j) {
    double s = 3.0;
    for (int i = 0; i < 6; ++i) s += xv[i * 4 + j] + rv[j];
    CHECK(got[j] == Approx(s).epsilon(1e-14));
  }
  double ss = 0.0;
  for (int i = 0; i < 24; ++i) ss += (xv[i] + rv[i % 4]) * (xv[i] + rv[i % 4]);
  CHECK(be->sum_squares(x) == Approx(ss).epsilon(1e-14));

  Tensor block = be->zeros({3, 5}, DType::f64, MemCategory::other);
  be->copy_block(x, 2, 1, block, 1, 2, 2, 3);
  auto bv = be->to_f64(block);
  CHECK(bv[1 * 5 + 2] == xv[2 * 4 + 1] + rv[1]);
  CHECK(bv[2 * 5 + 4] == xv[3 * 4 + 3] + rv[3]);
  CHECK(bv[0] == 0.0);
}

TEST_CASE("GeLU (tanh) forward and backward against finite differences", "[core]") {
  auto be = make_host_backend();
  auto xv = random_values(33, 11);
  for (auto& v : xv) v *= 4.0;
  Tensor x = be->from_f64(xv, {3, 11}, DType::f64, MemCategory::other);
  Tensor y = be->empty({3, 11}, DType::f64, MemCategory::other);
  be->gelu_forward(x, y);
  auto f = [](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); };
  auto yv = be->to_f64(y);
  for (int i = 0; i < 33; ++i) CHECK(yv[i] == Approx(f(xv[i])).epsilon(1e-14).margin(1e-15));
  Tensor dy = be->from_f64(std::vector<double>(33, 1.0), {3, 11}, DType::f64, MemCategory::other);
  Tensor dx = be->empty({3, 11}, DType::f64, MemCategory::other);
  be->gelu_backward(x, dy, dx);
  auto dv = be->to_f64(dx);
  for (int i = 0; i < 33; ++i) {
    double h = 1e-6, fd = (f(xv[i] + h) - f(xv[i] - h)) / (2 * h);
    CHECK(dv[i] == Approx(fd).epsilon(1e-7).margin(1e-9));
  }
}

TEST_CASE("LayerNorm pieces: split statistics merge to the full-row statistics", "[core][layernorm]") {
  auto be = make_host_backend();
  const std::int64_t rows = 5, cols = 12, parts = 3, part_cols = cols / parts;
  auto xv = random_values(rows * cols, 21);
  for (auto& v : xv) v = 1000.0 + v;  // a large offset: E[x²]−E[x]² would lose digits here
  Tensor stacked = be->empty({parts * rows, 2}, DType::f64, MemCategory::other);
  for (std::int64_t p = 0; p < parts; ++p) {
    Tensor xp = be->empty({rows, part_cols}, DType::f64, MemCategory::other);
    Tensor xfull = be->from_f64(xv, {rows, cols}, DType::f64, MemCategory::other);
    be->copy_block(xfull, 0, p * part_cols, xp, 0, 0, rows, part_cols);
    Tensor s = stacked.row_slice(p * rows, (p + 1) * rows);
    be->row_mean_m2(xp, s);
  }
  Tensor mr = be->empty({rows, 2}, DType::f64, MemCategory::other);
  be->merge_row_stats(stacked, static_cast<int>(parts), part_cols, 1e-5, mr);
  auto m = be->to_f64(mr);
  for (std::int64_t i = 0; i < rows; ++i) {
    double mean = 0, var = 0;
    for (std::int64_t j = 0; j < cols; ++j) mean += xv[i * cols + j];
    mean /= cols;
    for (std::int64_t j = 0; j < cols; ++j) var += (xv[i * cols + j] - mean) * (xv[i * cols + j] - mean);
    var /= cols;
    CHECK(m[2 * i] == Approx(mean).epsilon(1e-15));
    CHECK(m[2 * i + 1] == Approx(1.0 / std::sqrt(var + 1e-5)).epsilon(1e-12));
  }
}
