// The host backend's bf16 and f16 storage (core/host_low_precision.hpp): every op against a float64
// reference computed from the values as stored, on awkward shapes, in both formats; the mixed forms
// (16-bit data into f32 accumulators); GEMMs large enough to be cut into several tiles; conversions;
// and the refusals.  Element-wise ops must be their f32 op on the widened values, rounded once:
// within one unit in the last place of the 16-bit format.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "core/backend.hpp"
#include "core/convert.hpp"
#include "core/host_low_precision.hpp"
#include "test_values.hpp"

using namespace mdtp;
using mdtp::testing::random_values;
using mdtp::testing::rel_inf;

namespace {

// Unit roundoff of the storage: 2^-8 for bf16, 2^-11 for f16.
double unit_roundoff(DType dt) { return dt == DType::bf16 ? 0x1p-8 : 0x1p-11; }

// The values a tensor of `dt` holds for `v` (rounded once).
std::vector<double> as_stored(const std::vector<double>& v, DType dt) {
  std::vector<std::uint16_t> bits(v.size());
  convert_host(DType::f64, v.data(), dt, bits.data(), v.size());
  std::vector<double> out(v.size());
  convert_host(dt, bits.data(), DType::f64, out.data(), v.size());
  return out;
}

// Relative error per element, against the magnitude of the reference element (floor 1e-3 of the
// largest): the ops round each output once, so each element is within a unit roundoff or two.
double worst_elementwise(const std::vector<double>& got, const std::vector<double>& ref) {
  double top = 0.0, worst = 0.0;
  for (double r : ref) top = std::max(top, std::abs(r));
  for (std::size_t i = 0; i < ref.size(); ++i)
    worst = std::max(worst, std::abs(got[i] - ref[i]) / std::max(std::abs(ref[i]), 1e-3 * top));
  return worst;
}

double gelu(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

}  // namespace

TEST_CASE("16-bit gemm: every transpose, 16-bit or f32 C, against f64 of the stored values", "[core][lowp][gemm]") {
  auto be = make_host_backend();
  const std::int64_t m = 37, k = 29, n = 45;
  for (DType dt : {DType::bf16, DType::f16})
    for (DType ct : {dt, DType::f32})
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb) {
          INFO(dtype_name(dt) << " into " << dtype_name(ct) << " ta=" << ta << " tb=" << tb);
          const auto av = as_stored(random_values(m * k, 11), dt), bv = as_stored(random_values(k * n, 12), dt);
          const auto cv = ct == DType::f32 ? random_values(m * n, 13) : as_stored(random_values(m * n, 13), dt);
          Tensor a = be->from_f64(av, ta ? Shape{k, m} : Shape{m, k}, dt, MemCategory::other);
          Tensor b = be->from_f64(bv, tb ? Shape{n, k} : Shape{k, n}, dt, MemCategory::other);
          Tensor c = be->from_f64(cv, {m, n}, ct, MemCategory::other);
          be->gemm(ta, tb, 0.5, a, b, 1.5, c);
          std::vector<double> ref(m * n);
          for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < n; ++j) {
              double s = 0.0;
              for (std::int64_t p = 0; p < k; ++p)
                s += (ta ? av[p * m + i] : av[i * k + p]) * (tb ? bv[j * k + p] : bv[p * n + j]);
              ref[i * n + j] = 0.5 * s + 1.5 * cv[i * n + j];
            }
          // f32 accumulation: ~k·2^-24; a 16-bit C adds one rounding of the result.
          const double tol = ct == DType::f32 ? 1e-5 : 2 * unit_roundoff(dt);
          CHECK(rel_inf(be->to_f64(c), ref) <= tol);
        }
}

TEST_CASE("16-bit gemm cut into tiles: several column and row blocks, sampled against f64",
          "[core][lowp][gemm]") {
  auto be = make_host_backend();
  // k·n above half the scratch budget and m·k above a quarter: two column blocks, two row blocks.
  const std::int64_t budget = LowPrecisionOps::kGemmScratchFloats;
  const std::int64_t k = 6000, n = budget / 2 / k + 100, m = budget / 4 / k + 77;
  for (DType ct : {DType::bf16, DType::f32}) {
    INFO("bf16 into " << dtype_name(ct) << ", " << m << "x" << n << "x" << k);
    const auto av = as_stored(random_values(m * k, 21), DType::bf16);
    const auto bv = as_stored(random_values(k * n, 22), DType::bf16);
    Tensor a = be->from_f64(av, {m, k}, DType::bf16, MemCategory::other);
    Tensor b = be->from_f64(bv, {n, k}, DType::bf16, MemCategory::other);  // transposed: B's rows are columns
    Tensor c = be->zeros({m, n}, ct, MemCategory::other);
    be->gemm(false, true, 1.0, a, b, 0.0, c);
    const auto got = be->to_f64(c);
    std::mt19937_64 gen(5);
    double worst = 0.0, scale = std::sqrt(static_cast<double>(k)) / 3;  // |c| ~ sqrt(k)/3
    for (int s = 0; s < 400; ++s) {
      const std::int64_t i = static_cast<std::int64_t>(gen() % m), j = static_cast<std::int64_t>(gen() % n);
      double ref = 0.0;
      for (std::int64_t p = 0; p < k; ++p) ref += av[i * k + p] * bv[j * k + p];
      worst = std::max(worst, std::abs(got[i * n + j] - ref) / scale);
    }
    // Every tile's corners are among the samples' rows and columns often enough; and the last
    // column and row blocks: check their corners explicitly.
    for (auto [i, j] : {std::pair{m - 1, n - 1}, std::pair{std::int64_t{0}, n - 1}, std::pair{m - 1, std::int64_t{0}}}) {
      double ref = 0.0;
      for (std::int64_t p = 0; p < k; ++p) ref += av[i * k + p] * bv[j * k + p];
      worst = std::max(worst, std::abs(got[i * n + j] - ref) / scale);
    }
    CHECK(worst <= (ct == DType::f32 ? 1e-5 : 4 * unit_roundoff(DType::bf16)));
  }
}

TEST_CASE("16-bit element-wise ops and reductions: the f32 op on stored values, rounded once",
          "[core][lowp]") {
  auto be = make_host_backend();
  const std::int64_t rows = 23, cols = 1031;  // rows x cols spans several blocks of the row ops
  for (DType dt : {DType::bf16, DType::f16}) {
    INFO(dtype_name(dt));
    const double u = unit_roundoff(dt);
    const auto xv = as_stored(random_values(rows * cols, 31, -3, 3), dt);
    const auto rv = as_stored(random_values(cols, 32), dt), yv = as_stored(random_values(rows * cols, 33), dt);
    Tensor x = be->from_f64(xv, {rows, cols}, dt, MemCategory::other);

    Tensor y = be->empty({rows, cols}, dt, MemCategory::other);
    be->gelu_forward(x, y);
    std::vector<double> ref(xv.size());
    for (std::size_t i = 0; i < xv.size(); ++i) ref[i] = gelu(xv[i]);
    CHECK(worst_elementwise(be->to_f64(y), ref) <= 1.01 * u);

    Tensor dy = be->from_f64(yv, {rows, cols}, dt, MemCategory::other), dx = be->empty({rows, cols}, dt, MemCategory::other);
    be->gelu_backward(x, dy, dx);
    for (std::size_t i = 0; i < xv.size(); ++i) {
      const double h = 1e-6;
      ref[i] = yv[i] * (gelu(xv[i] + h) - gelu(xv[i] - h)) / (2 * h);
    }
    CHECK(worst_elementwise(be->to_f64(dx), ref) <= 1.1 * u);

    Tensor z = be->from_f64(yv, {rows, cols}, dt, MemCategory::other);
    Tensor row = be->from_f64(rv, {cols}, dt, MemCategory::other);
    be->add_row_vector(z, row);
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j) ref[i * cols + j] = yv[i * cols + j] + rv[j];
    CHECK(worst_elementwise(be->to_f64(z), ref) <= 1.01 * u);

    Tensor w = be->from_f64(yv, {rows, cols}, dt, MemCategory::other);
    be->axpy(-0.75, x, w);
    for (std::size_t i = 0; i < ref.size(); ++i) ref[i] = yv[i] - 0.75 * xv[i];
    CHECK(worst_elementwise(be->to_f64(w), ref) <= 1.01 * u);
    be->scale(w, 0.5);  // exact in binary, once the sum is stored
    const auto w_before = be->to_f64(w);

    double ss = 0.0;
    for (double v : xv) ss += v * v;
    CHECK(be->sum_squares(x) == Approx(ss).epsilon(1e-12));  // squares of stored values, in double

    be->fill(w, 1.0 / 3.0);
    CHECK(be->to_f64(w)[rows * cols - 1] == as_stored({1.0 / 3.0}, dt)[0]);
    CHECK(w_before[0] == Approx(0.5 * (yv[0] - 0.75 * xv[0])).epsilon(2 * u));
  }
}

TEST_CASE("16-bit column sums and axpy into f32 accumulators (gradients kept in f32)", "[core][lowp]") {
  auto be = make_host_backend();
  const std::int64_t rows = 301, cols = 67;
  for (DType dt : {DType::bf16, DType::f16}) {
    INFO(dtype_name(dt));
    const auto xv = as_stored(random_values(rows * cols, 41), dt), ov = random_values(cols, 42);
    Tensor x = be->from_f64(xv, {rows, cols}, dt, MemCategory::other);
    for (DType acc : {DType::f32, dt}) {
      INFO("accumulator " << dtype_name(acc));
      const auto start = acc == DType::f32 ? ov : as_stored(ov, dt);
      Tensor out = be->from_f64(start, {cols}, acc, MemCategory::other);
      be->column_sums(x, out, 1.0);
      std::vector<double> ref(start);
      for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < cols; ++j) ref[j] += xv[i * cols + j];
      CHECK(rel_inf(be->to_f64(out), ref) <= (acc == DType::f32 ? 1e-6 : unit_roundoff(dt)));
    }
    Tensor y = be->from_f64(random_values(rows * cols, 43), {rows, cols}, DType::f32, MemCategory::other);
    const auto yv = be->to_f64(y);
    be->axpy(2.0, x, y);
    std::vector<double> ref(yv);
    for (std::size_t i = 0; i < ref.size(); ++i) ref[i] += 2.0 * xv[i];
    CHECK(rel_inf(be->to_f64(y), ref) <= 1e-7);
  }
}

TEST_CASE("16-bit LayerNorm forward and backward, dγ dβ in 16-bit or f32, against f64", "[core][lowp][layernorm]") {
  auto be = make_host_backend();
  const std::int64_t rows = 19, cols = 2053;  // 7 rows per block: three blocks, the last partial
  const double eps = 1e-5;
  for (DType dt : {DType::bf16, DType::f16})
    for (DType gt : {dt, DType::f32}) {
      INFO(dtype_name(dt) << ", parameter gradients " << dtype_name(gt));
      const double u = unit_roundoff(dt);
      const auto xv = as_stored(random_values(rows * cols, 51, -2, 2), dt);
      const auto gv = as_stored(random_values(cols, 52, 0.5, 1.5), dt), bv = as_stored(random_values(cols, 53), dt);
      const auto dyv = as_stored(random_values(rows * cols, 54), dt);
      Tensor x = be->from_f64(xv, {rows, cols}, dt, MemCategory::other);
      Tensor gamma = be->from_f64(gv, {cols}, dt, MemCategory::other), beta = be->from_f64(bv, {cols}, dt, MemCategory::other);
      Tensor stats = be->empty({rows, 2}, DType::f64, MemCategory::other);
      be->row_mean_m2(x, stats);
      Tensor mr = be->empty({rows, 2}, DType::f64, MemCategory::other);
      be->merge_row_stats(stats, 1, cols, eps, mr);
      Tensor xhat = be->empty({rows, cols}, dt, MemCategory::other), y = be->empty({rows, cols}, dt, MemCategory::other);
      be->layernorm_apply(x, mr, gamma, beta, xhat, y);

      // f64 reference from the stored x, gamma, beta.
      std::vector<double> mean(rows), rstd(rows), href(rows * cols), yref(rows * cols);
      for (std::int64_t i = 0; i < rows; ++i) {
        double s = 0, q = 0;
        for (std::int64_t j = 0; j < cols; ++j) s += xv[i * cols + j];
        mean[i] = s / cols;
        for (std::int64_t j = 0; j < cols; ++j) q += (xv[i * cols + j] - mean[i]) * (xv[i * cols + j] - mean[i]);
        rstd[i] = 1 / std::sqrt(q / cols + eps);
        for (std::int64_t j = 0; j < cols; ++j) {
          href[i * cols + j] = (xv[i * cols + j] - mean[i]) * rstd[i];
          yref[i * cols + j] = href[i * cols + j] * gv[j] + bv[j];
        }
      }
      const auto mrv = be->to_f64(mr);
      for (std::int64_t i = 0; i < rows; ++i) {
        CHECK(mrv[2 * i] == Approx(mean[i]).margin(1e-12));
        CHECK(mrv[2 * i + 1] == Approx(rstd[i]).epsilon(1e-10));
      }
      CHECK(rel_inf(be->to_f64(xhat), href) <= u);
      CHECK(rel_inf(be->to_f64(y), yref) <= 2 * u);

      // Backward from the stored xhat (what the layer keeps).
      const auto hs = be->to_f64(xhat);
      Tensor dy = be->from_f64(dyv, {rows, cols}, dt, MemCategory::other);
      Tensor sums = be->empty({rows, 2}, DType::f64, MemCategory::other);
      be->layernorm_backward_sums(dy, xhat, gamma, sums);
      Tensor dx = be->empty({rows, cols}, dt, MemCategory::other);
      const auto g0 = gt == DType::f32 ? random_values(cols, 55) : as_stored(random_values(cols, 55), dt);
      Tensor dgamma = be->from_f64(g0, {cols}, gt, MemCategory::other), dbeta = be->from_f64(g0, {cols}, gt, MemCategory::other);
      be->layernorm_backward(dy, xhat, gamma, mr, sums, cols, dx, dgamma, dbeta);
      std::vector<double> dxref(rows * cols), dgref(g0), dbref(g0);
      for (std::int64_t i = 0; i < rows; ++i) {
        double s1 = 0, s2 = 0;
        for (std::int64_t j = 0; j < cols; ++j) {
          s1 += dyv[i * cols + j] * gv[j];
          s2 += dyv[i * cols + j] * gv[j] * hs[i * cols + j];
        }
        for (std::int64_t j = 0; j < cols; ++j) {
          dxref[i * cols + j] = mrv[2 * i + 1] * (dyv[i * cols + j] * gv[j] - (s1 + hs[i * cols + j] * s2) / cols);
          dgref[j] += dyv[i * cols + j] * hs[i * cols + j];
          dbref[j] += dyv[i * cols + j];
        }
      }
      CHECK(rel_inf(be->to_f64(dx), dxref) <= 2 * u);
      const double acc_tol = gt == DType::f32 ? 1e-5 : 2 * u;
      CHECK(rel_inf(be->to_f64(dgamma), dgref) <= acc_tol);
      CHECK(rel_inf(be->to_f64(dbeta), dbref) <= acc_tol);
    }
}

TEST_CASE("convert: any dtype into any, one rounding, the same bits as convert_host", "[core][lowp]") {
  auto be = make_host_backend();
  const auto v = random_values(1001, 61, -1e3, 1e3);
  for (DType from : {DType::f64, DType::f32, DType::bf16, DType::f16})
    for (DType to : {DType::f64, DType::f32, DType::bf16, DType::f16}) {
      INFO(dtype_name(from) << " -> " << dtype_name(to));
      Tensor src = be->from_f64(v, {1001}, from, MemCategory::other), dst = be->empty({1001}, to, MemCategory::other);
      be->convert(src, dst);
      std::vector<double> stored = be->to_f64(src), want(stored.size());
      std::vector<unsigned char> buf(8 * stored.size());
      convert_host(DType::f64, stored.data(), to, buf.data(), stored.size());
      convert_host(to, buf.data(), DType::f64, want.data(), stored.size());
      CHECK(be->to_f64(dst) == want);
    }
}

TEST_CASE("16-bit operands: what is refused, and why", "[core][lowp]") {
  auto be = make_host_backend();
  Tensor a16 = be->zeros({4, 4}, DType::bf16, MemCategory::other), f16 = be->zeros({4, 4}, DType::f16, MemCategory::other);
  Tensor a32 = be->zeros({4, 4}, DType::f32, MemCategory::other), a64 = be->zeros({4, 4}, DType::f64, MemCategory::other);
  Tensor c16 = be->zeros({4, 4}, DType::bf16, MemCategory::other);
  // An f32 accumulator of 16-bit data is fine; a narrower or other accumulator is not.
  CHECK_NOTHROW(be->gemm(false, false, 1, a16, a16, 0, a32));
  CHECK_THROWS_WITH(be->gemm(false, false, 1, a32, a32, 0, c16), Catch::Contains("gemm: mixed dtypes f32 and bf16"));
  CHECK_THROWS_WITH(be->gemm(false, false, 1, a16, a16, 0, a64), Catch::Contains("mixed dtypes bf16 and f64"));
  CHECK_THROWS_WITH(be->gemm(false, false, 1, a16, f16, 0, a32), Catch::Contains("gemm: mixed dtypes bf16 and f16"));
  CHECK_THROWS_WITH(be->axpy(1, a16, f16), Catch::Contains("an accumulator may be f32 for bf16/f16 data"));
  CHECK_THROWS_WITH(be->gelu_forward(a16, a32), Catch::Contains("gelu: mixed dtypes bf16 and f32"));
  // AdamW keeps its moments in the parameter's dtype: not in 16 bits.
  CHECK_THROWS_WITH(be->adamw_update(a16, a16, c16, c16, AdamWStep{}), Catch::Contains("needs f32 or f64; got bf16"));
}
