// The vectorised host kernels against scalar float64 references: exp/tanh/log/cos (including
// extreme and special inputs), GeLU and its derivative, LayerNorm statistics and backward, AdamW,
// on awkward lengths (0, 1, odd, not a multiple of any vector or block size).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "core/backend.hpp"
#include "core/vector_math.hpp"
#include "test_values.hpp"

using namespace mdtp;
using mdtp::testing::random_values;
using mdtp::testing::rel_inf;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// got and ref agree within `ulps` units in the last place of T, or are the same special value.
template <class T>
bool close_ulps(T got, double ref, double ulps) {
  if (std::isnan(ref)) return std::isnan(got);
  // Past T's range (exp(89) in f32) or exactly 0: the same special value.
  const T rounded = static_cast<T>(ref);
  if (std::isinf(rounded) || rounded == T(0)) return got == rounded;
  const double ulp = std::numeric_limits<T>::epsilon() * std::max(std::abs(ref), static_cast<double>(std::numeric_limits<T>::min()));
  return std::abs(static_cast<double>(got) - ref) <= ulps * ulp;
}

template <class T, class Vec, class Ref>
void check_function(const char* name, Vec vec, Ref ref, std::vector<double> inputs, double ulps = 2.0) {
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{7}, std::size_t{9}, std::size_t{33},
                        inputs.size()}) {
    n = std::min(n, inputs.size());
    std::vector<T> x(inputs.begin(), inputs.begin() + static_cast<std::ptrdiff_t>(n)), y(n);
    vec(x.data(), y.data(), static_cast<std::int64_t>(n));
    for (std::size_t i = 0; i < n; ++i) {
      INFO(name << "(" << static_cast<double>(x[i]) << ") in " << (sizeof(T) == 8 ? "f64" : "f32") << " = "
                << static_cast<double>(y[i]) << ", reference " << ref(static_cast<double>(x[i])));
      CHECK(close_ulps(y[i], ref(static_cast<double>(x[i])), ulps));
    }
  }
}

}  // namespace

TEST_CASE("vector exp, tanh, log and cos match libm within 2 ulp (f32 tanh 4), extremes included",
          "[core][vector-math]") {
  INFO("vector math: " << vector_math_name());
  auto exps = random_values(101, 1, -30.0, 30.0);
  for (double v : {0.0, -0.0, 1e-300, -1e-300, -700.0, -745.0, -746.0, -1e4, -kInf, 88.0, 88.8, 709.0, 709.9, 1e4, kInf})
    exps.push_back(v);
  auto tanhs = random_values(101, 2, -5.0, 5.0);
  for (double v : {0.0, -0.0, 1e-12, -1e-12, 1e-300, 0.5, 9.0, -9.0, 20.0, -20.0, 1e3, -1e300, kInf, -kInf})
    tanhs.push_back(v);
  auto logs = random_values(101, 3, 1e-6, 100.0);
  for (double v : {1.0, 1e-300, 4.9e-324, 1e-30, 1e30, 1e300, 0.0, kInf}) logs.push_back(v);
  auto coss = random_values(101, 4, 0.0, 6.3);
  for (double v : {0.0, 1e-10, 1.5707963267948966, 3.141592653589793, 100.0, -7.0}) coss.push_back(v);
  const auto f_exp = [](const auto* x, auto* y, std::int64_t n) { array_exp(x, y, n); };
  const auto f_tanh = [](const auto* x, auto* y, std::int64_t n) { array_tanh(x, y, n); };
  const auto f_log = [](const auto* x, auto* y, std::int64_t n) { array_log(x, y, n); };
  const auto f_cos = [](const auto* x, auto* y, std::int64_t n) { array_cos(x, y, n); };
  check_function<double>("exp", f_exp, [](double v) { return std::exp(v); }, exps);
  check_function<double>("tanh", f_tanh, [](double v) { return std::tanh(v); }, tanhs);
  check_function<double>("log", f_log, [](double v) { return std::log(v); }, logs);
  check_function<double>("cos", f_cos, [](double v) { return std::cos(v); }, coss);
  // f32: against the float64 function of the float input.
  check_function<float>("exp", f_exp, [](double v) { return std::exp(v); }, exps);
  check_function<float>("tanh", f_tanh, [](double v) { return std::tanh(v); }, tanhs, 4.0);
  check_function<float>("log", f_log, [](double v) { return std::log(v); }, logs);
  check_function<float>("cos", f_cos, [](double v) { return std::cos(v); }, coss);
}

TEST_CASE("vector math results do not depend on an element's position in the array", "[core][vector-math]") {
  const auto x = random_values(45, 5, -10.0, 10.0);
  std::vector<double> whole(x.size()), shifted(x.size() - 3);
  array_tanh(x.data(), whole.data(), static_cast<std::int64_t>(x.size()));
  array_tanh(x.data() + 3, shifted.data(), static_cast<std::int64_t>(shifted.size()));
  CHECK(std::memcmp(whole.data() + 3, shifted.data(), shifted.size() * sizeof(double)) == 0);
  std::vector<float> xf(x.begin(), x.end()), wf(xf.size()), sf(xf.size() - 5);
  array_exp(xf.data(), wf.data(), static_cast<std::int64_t>(xf.size()));
  array_exp(xf.data() + 5, sf.data(), static_cast<std::int64_t>(sf.size()));
  CHECK(std::memcmp(wf.data() + 5, sf.data(), sf.size() * sizeof(float)) == 0);
  // In place.
  std::vector<double> inplace = x;
  array_tanh(inplace.data(), inplace.data(), static_cast<std::int64_t>(inplace.size()));
  CHECK(inplace == whole);
}

TEST_CASE("GeLU forward and backward match the scalar float64 formula at every length", "[core][gelu]") {
  auto be = make_host_backend();
  const double c = std::sqrt(2.0 / M_PI);
  const auto ref_y = [c](double v) { return 0.5 * v * (1 + std::tanh(c * (v + 0.044715 * v * v * v))); };
  const auto ref_d = [c](double v) {
    const double th = std::tanh(c * (v + 0.044715 * v * v * v));
    return 0.5 * (1 + th) + 0.5 * v * (1 - th * th) * c * (1 + 3 * 0.044715 * v * v);
  };
  for (std::int64_t n : {1, 7, 511, 513, 1031}) {
    auto xv = random_values(static_cast<std::size_t>(n), 10 + static_cast<unsigned>(n), -6.0, 6.0);
    // Extremes: tanh saturates (the forward's 1 + tanh cancels to 0 for large negative x).
    const double extremes[] = {-1e3, -30.0, -10.0, -1e-8, 0.0, 1e-8, 10.0, 30.0, 1e3};
    for (std::size_t i = 0; i < std::size(extremes) && i < xv.size(); ++i) xv[i * 3 % xv.size()] = extremes[i];
    const auto gv = random_values(static_cast<std::size_t>(n), 20 + static_cast<unsigned>(n));
    for (DType dt : {DType::f64, DType::f32}) {
      // Relative, plus what T's rounding of the terms allows where they cancel (1 + tanh → 0 for
      // x ≪ 0, and the two terms of the derivative there): a few ulp of T times their size.
      const double tol = dt == DType::f64 ? 1e-13 : 1e-5;
      const double eps = dt == DType::f64 ? 0x1p-52 : 0x1p-23;
      Tensor x = be->from_f64(xv, {n}, dt, MemCategory::other), y = be->empty({n}, dt, MemCategory::other);
      Tensor dy = be->from_f64(gv, {n}, dt, MemCategory::other), dx = be->empty({n}, dt, MemCategory::other);
      be->gelu_forward(x, y);
      be->gelu_backward(x, dy, dx);
      const auto xs = be->to_f64(x), ys = be->to_f64(y), dxs = be->to_f64(dx), gs = be->to_f64(dy);
      for (std::int64_t i = 0; i < n; ++i) {
        INFO("n=" << n << " " << dtype_name(dt) << " x=" << xs[i]);
        const double margin = 8 * eps * (1 + std::abs(xs[i]));
        CHECK(ys[i] == Approx(ref_y(xs[i])).epsilon(tol).margin(margin));
        CHECK(dxs[i] == Approx(gs[i] * ref_d(xs[i])).epsilon(tol).margin(margin * (1 + xs[i] * xs[i])));
      }
    }
  }
}

TEST_CASE("LayerNorm kernels match scalar float64 references on one-row and odd shapes", "[core][layernorm]") {
  auto be = make_host_backend();
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{1, 1}, {1, 7}, {5, 13}, {3, 1025}, {2, 4}};
  for (auto [rows, cols] : shapes)
    for (DType dt : {DType::f64, DType::f32}) {
      const double tol = dt == DType::f64 ? 1e-13 : 1e-5;
      INFO(rows << "x" << cols << " " << dtype_name(dt));
      auto xv = random_values(static_cast<std::size_t>(rows * cols), 31, -2.0, 2.0);
      for (auto& v : xv) v += 100.0;  // an offset the mean must remove without losing digits
      const auto gv = random_values(static_cast<std::size_t>(cols), 32), bv = random_values(static_cast<std::size_t>(cols), 33);
      const auto dyv = random_values(static_cast<std::size_t>(rows * cols), 34);
      Tensor x = be->from_f64(xv, {rows, cols}, dt, MemCategory::other);
      const auto xs = be->to_f64(x);  // the values as stored (f32-rounded)
      Tensor stats = be->empty({rows, 2}, DType::f64, MemCategory::other);
      be->row_mean_m2(x, stats);
      Tensor mr = be->empty({rows, 2}, DType::f64, MemCategory::other);
      be->merge_row_stats(stats, 1, cols, 1e-5, mr);
      Tensor gamma = be->from_f64(gv, {cols}, dt, MemCategory::other), beta = be->from_f64(bv, {cols}, dt, MemCategory::other);
      Tensor xhat = be->empty({rows, cols}, dt, MemCategory::other), y = be->empty({rows, cols}, dt, MemCategory::other);
      be->layernorm_apply(x, mr, gamma, beta, xhat, y);
      Tensor dy = be->from_f64(dyv, {rows, cols}, dt, MemCategory::other);
      Tensor sums = be->empty({rows, 2}, DType::f64, MemCategory::other);
      be->layernorm_backward_sums(dy, xhat, gamma, sums);
      Tensor dx = be->empty({rows, cols}, dt, MemCategory::other);
      Tensor dgamma = be->zeros({cols}, dt, MemCategory::other), dbeta = be->zeros({cols}, dt, MemCategory::other);
      be->layernorm_backward(dy, xhat, gamma, mr, sums, cols, dx, dgamma, dbeta);

      const auto g = be->to_f64(gamma), b = be->to_f64(beta), d = be->to_f64(dy);
      std::vector<double> ref_y(xs.size()), ref_dx(xs.size()), ref_dg(static_cast<std::size_t>(cols), 0.0),
          ref_db(static_cast<std::size_t>(cols), 0.0), ref_mean(static_cast<std::size_t>(rows));
      for (std::int64_t i = 0; i < rows; ++i) {
        double mean = 0.0, var = 0.0;
        for (std::int64_t j = 0; j < cols; ++j) mean += xs[i * cols + j];
        mean /= static_cast<double>(cols);
        for (std::int64_t j = 0; j < cols; ++j) var += (xs[i * cols + j] - mean) * (xs[i * cols + j] - mean);
        const double rstd = 1.0 / std::sqrt(var / static_cast<double>(cols) + 1e-5);
        ref_mean[static_cast<std::size_t>(i)] = mean;
        double s1 = 0.0, s2 = 0.0;
        for (std::int64_t j = 0; j < cols; ++j) {
          const double h = (xs[i * cols + j] - mean) * rstd;
          ref_y[i * cols + j] = h * g[j] + b[j];
          s1 += d[i * cols + j] * g[j];
          s2 += d[i * cols + j] * g[j] * h;
          ref_dg[j] += d[i * cols + j] * h;
          ref_db[j] += d[i * cols + j];
        }
        for (std::int64_t j = 0; j < cols; ++j) {
          const double h = (xs[i * cols + j] - mean) * rstd;
          ref_dx[i * cols + j] = rstd * (d[i * cols + j] * g[j] - (s1 + h * s2) / static_cast<double>(cols));
        }
      }
      const auto m = be->to_f64(mr);
      for (std::int64_t i = 0; i < rows; ++i) CHECK(m[2 * i] == Approx(ref_mean[i]).epsilon(1e-14));
      CHECK(rel_inf(be->to_f64(y), ref_y) <= tol);
      CHECK(rel_inf(be->to_f64(dx), ref_dx) <= (cols == 1 ? 1e-9 : tol));  // n = 1: dx is all cancellation
      CHECK(rel_inf(be->to_f64(dgamma), ref_dg) <= tol);
      CHECK(rel_inf(be->to_f64(dbeta), ref_db) <= tol);
    }
}

TEST_CASE("AdamW matches the scalar float64 update at every length", "[core][adamw]") {
  auto be = make_host_backend();
  AdamWStep st;
  st.lr = 0.01;
  st.weight_decay = 0.1;
  st.step = 3;
  st.grad_scale = 0.7;
  for (std::int64_t n : {1, 5, 512, 1027}) {
    const auto wv = random_values(static_cast<std::size_t>(n), 41), gv = random_values(static_cast<std::size_t>(n), 42);
    const auto mv = random_values(static_cast<std::size_t>(n), 43);
    auto vv = random_values(static_cast<std::size_t>(n), 44, 0.0, 1e-2);
    vv[0] = 0.0;  // a fresh second moment: eps decides
    for (DType dt : {DType::f64, DType::f32}) {
      Tensor w = be->from_f64(wv, {n}, dt, MemCategory::other), g = be->from_f64(gv, {n}, dt, MemCategory::other);
      Tensor m = be->from_f64(mv, {n}, dt, MemCategory::other), v = be->from_f64(vv, {n}, dt, MemCategory::other);
      const auto w0 = be->to_f64(w), g0 = be->to_f64(g), m0 = be->to_f64(m), v0 = be->to_f64(v);
      be->adamw_update(w, g, m, v, st);
      std::vector<double> rw(w0), rm(m0), rv(v0);
      const double c1 = 1 - std::pow(st.beta1, 3.0), c2 = 1 - std::pow(st.beta2, 3.0);
      for (std::size_t i = 0; i < rw.size(); ++i) {
        const double gi = g0[i] * st.grad_scale;
        rm[i] = st.beta1 * rm[i] + (1 - st.beta1) * gi;
        rv[i] = st.beta2 * rv[i] + (1 - st.beta2) * gi * gi;
        rw[i] = rw[i] * (1 - st.lr * st.weight_decay) - st.lr / c1 * rm[i] / (std::sqrt(rv[i] / c2) + st.eps);
      }
      const double tol = dt == DType::f64 ? 1e-13 : 1e-5;
      INFO("n=" << n << " " << dtype_name(dt));
      CHECK(rel_inf(be->to_f64(w), rw) <= tol);
      CHECK(rel_inf(be->to_f64(m), rm) <= tol);
      CHECK(rel_inf(be->to_f64(v), rv) <= tol);
    }
  }
}
