// The GPT kernels (host implementation) and the Optimizer, against
// direct float64 formulas: embedding lookup/scatter-add, vocabulary-split cross-entropy pieces
// with padding and extreme logits, attention by GEMMs against the scalar float64 attention,
// AdamW (PyTorch semantics), clipping and weight decay on 2+-D parameters only, and the initial
// parameters against init_value's definition in every mode.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <random>

#include "support/gpt_harness.hpp"
#include "model/gpt_kernels.hpp"
#include "zero/optimizer.hpp"
#include "support/whole_model.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> uniform_values(std::size_t n, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

struct AttentionShape {
  std::int64_t sequences, T, heads, d;
};

struct AttentionRef {
  std::vector<double> y, probs, dqkv;
};

// Causal attention as plain float64 loops per (sequence, head, query row): the definition the
// GEMM formulation must reproduce.
AttentionRef attention_reference(const AttentionShape& s, const std::vector<double>& qkv, const std::vector<double>& dy) {
  const std::int64_t C = s.heads * s.d, C3 = 3 * C, N = s.sequences * s.T;
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.d));
  AttentionRef r{std::vector<double>(static_cast<std::size_t>(N * C), 0.0),
                 std::vector<double>(static_cast<std::size_t>(s.sequences * s.heads * s.T * s.T), 0.0),
                 std::vector<double>(static_cast<std::size_t>(N * C3), 0.0)};
  auto x = [&](std::int64_t row, std::int64_t col) { return qkv[static_cast<std::size_t>(row * C3 + col)]; };
  for (std::int64_t b = 0; b < s.sequences; ++b)
    for (std::int64_t h = 0; h < s.heads; ++h) {
      double* p = r.probs.data() + (b * s.heads + h) * s.T * s.T;
      for (std::int64_t i = 0; i < s.T; ++i) {
        double mx = -kInf, sum = 0.0;
        for (std::int64_t j = 0; j <= i; ++j) {
          double dot = 0.0;
          for (std::int64_t e = 0; e < s.d; ++e) dot += x(b * s.T + i, h * s.d + e) * x(b * s.T + j, C + h * s.d + e);
          p[i * s.T + j] = dot * scale;
          mx = std::max(mx, dot * scale);
        }
        for (std::int64_t j = 0; j <= i; ++j) sum += p[i * s.T + j] = std::exp(p[i * s.T + j] - mx);
        for (std::int64_t j = 0; j <= i; ++j) p[i * s.T + j] /= sum;
        for (std::int64_t e = 0; e < s.d; ++e) {
          double acc = 0.0;
          for (std::int64_t j = 0; j <= i; ++j) acc += p[i * s.T + j] * x(b * s.T + j, 2 * C + h * s.d + e);
          r.y[static_cast<std::size_t>((b * s.T + i) * C + h * s.d + e)] = acc;
        }
      }
      for (std::int64_t i = 0; i < s.T; ++i) {
        const double* g = dy.data() + (b * s.T + i) * C + h * s.d;
        std::vector<double> dp(static_cast<std::size_t>(i + 1));
        double dot = 0.0;
        for (std::int64_t j = 0; j <= i; ++j) {
          for (std::int64_t e = 0; e < s.d; ++e) {
            dp[static_cast<std::size_t>(j)] += g[e] * x(b * s.T + j, 2 * C + h * s.d + e);
            r.dqkv[static_cast<std::size_t>((b * s.T + j) * C3 + 2 * C + h * s.d + e)] += p[i * s.T + j] * g[e];
          }
          dot += p[i * s.T + j] * dp[static_cast<std::size_t>(j)];
        }
        for (std::int64_t j = 0; j <= i; ++j) {
          const double ds = p[i * s.T + j] * (dp[static_cast<std::size_t>(j)] - dot) * scale;
          for (std::int64_t e = 0; e < s.d; ++e) {
            r.dqkv[static_cast<std::size_t>((b * s.T + i) * C3 + h * s.d + e)] += ds * x(b * s.T + j, C + h * s.d + e);
            r.dqkv[static_cast<std::size_t>((b * s.T + j) * C3 + C + h * s.d + e)] += ds * x(b * s.T + i, h * s.d + e);
          }
        }
      }
    }
  return r;
}

// init_value's definition, as first written: what every run and checkpoint was initialised with.
std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
double init_reference(std::uint64_t seed, const std::string& name, std::int64_t index, double std) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ULL;
  const std::uint64_t base = splitmix(seed ^ splitmix(h) ^ splitmix(static_cast<std::uint64_t>(index) * 2 + 1));
  const auto unit = [](std::uint64_t bits) { return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53; };
  const double u1 = unit(splitmix(base)), u2 = unit(splitmix(base + 1));
  return std * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace

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
  OptimizerSpec oc;
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
    forward_backward(*run.model, batch.inputs, batch.targets);
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
  CHECK_THROWS_WITH(parse_optimizer_kind("adam"), Catch::Contains("unknown optimizer 'adam'"));
  OptimizerSpec bad;
  bad.kind = static_cast<OptimizerKind>(7);  // only a cast makes an unknown kind
  CHECK_THROWS_WITH(Optimizer(bad, run.model->parameters(), *run.mesh, *run.backend),
                    Catch::Contains("unknown optimizer kind 7"));
}

TEST_CASE("cross-entropy pieces with extreme and -inf logits match float64 formulas", "[train][ops]") {
  auto be = make_host_backend();
  auto kernels = make_host_gpt_kernels(*be);
  // Valid columns 0..4 (column 5 is padding); -inf logits are masked entries, ±1e4 overflow exp.
  const std::vector<double> l{-kInf, 3.0, 1e4, -1e4, 0.5, 7.0, -kInf, -kInf, 2.0, -kInf, 80.0, 7.0, 0.1, 0.2, 0.3, 0.4, 0.5, 7.0};
  const std::vector<std::int32_t> targets{2, 3, 4};
  for (DType dt : {DType::f64, DType::f32}) {
    INFO(dtype_name(dt));
    const double tol = dt == DType::f64 ? 1e-15 : 1e-6;
    Tensor logits = be->from_f64(l, {3, 6}, dt, MemCategory::other);
    Tensor mx = be->empty({3}, DType::f64, MemCategory::other);
    kernels->xent_row_max(logits, 5, mx);
    CHECK(be->to_f64(mx) == std::vector<double>{1e4, 80.0, 0.5});
    Tensor sums = be->empty({3, 2}, DType::f64, MemCategory::other);
    kernels->xent_partial_sums(logits, 5, mx, targets, 0, sums);
    const std::vector<double> s = be->to_f64(sums), m = be->to_f64(mx);
    std::vector<double> lse(3);
    for (int i = 0; i < 3; ++i) {
      double ref = 0.0;
      for (int j = 0; j < 5; ++j) ref += std::exp(l[i * 6 + j] - m[i]);
      CHECK(s[2 * i] == Approx(ref).epsilon(tol));
      CHECK(s[2 * i + 1] == static_cast<double>(dt == DType::f32 ? static_cast<float>(l[i * 6 + targets[i]]) : l[i * 6 + targets[i]]));
      lse[i] = m[i] + std::log(s[2 * i]);
    }
    Tensor z = be->from_f64(lse, {3}, DType::f64, MemCategory::other);
    Tensor d = be->empty({3, 6}, dt, MemCategory::other);
    kernels->xent_backward(logits, 5, z, targets, 0, 0.25, d);
    const std::vector<double> g = be->to_f64(d), lv = be->to_f64(logits);
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 5; ++j) {
        const double ref = 0.25 * (std::exp(lv[i * 6 + j] - lse[i]) - (j == targets[i] ? 1.0 : 0.0));
        INFO("row " << i << " column " << j);
        CHECK(g[i * 6 + j] == Approx(ref).epsilon(tol * 10).margin(1e-300));
      }
      CHECK(g[i * 6 + 5] == 0.0);
    }
    CHECK(g[0] == 0.0);  // exp(-inf) is exactly 0
  }
}

TEST_CASE("host attention by GEMMs matches the scalar float64 attention on awkward shapes", "[train][ops][attention]") {
  auto be = make_host_backend();
  auto kernels = make_host_gpt_kernels(*be);
  // T = 1, T below, at and past the query block (64), several blocks with a ragged last one;
  // odd head widths; one and several sequences.
  const AttentionShape shapes[] = {{1, 1, 1, 1}, {2, 3, 2, 1}, {1, 5, 3, 3}, {1, 63, 2, 4},
                                   {1, 64, 1, 2}, {2, 65, 1, 5}, {1, 130, 2, 8}, {1, 129, 3, 7}};
  unsigned seed = 100;
  for (const AttentionShape& sh : shapes)
    for (DType dt : {DType::f64, DType::f32}) {
      const std::int64_t C = sh.heads * sh.d, N = sh.sequences * sh.T;
      INFO("sequences " << sh.sequences << " T " << sh.T << " heads " << sh.heads << " d " << sh.d << " "
                        << dtype_name(dt));
      auto qv = uniform_values(static_cast<std::size_t>(N * 3 * C), seed++);
      for (auto& v : qv) v *= 2.0;  // scores of a few units: a softmax far from uniform
      Tensor qkv = be->from_f64(qv, {N, 3 * C}, dt, MemCategory::other);
      Tensor dy = be->from_f64(uniform_values(static_cast<std::size_t>(N * C), seed++), {N, C}, dt, MemCategory::other);
      Tensor y = be->empty({N, C}, dt, MemCategory::other);
      Tensor probs = be->empty({sh.sequences, sh.heads, sh.T, sh.T}, dt, MemCategory::other);
      kernels->attention_forward(qkv, sh.T, sh.heads, y, probs);
      Tensor dqkv = be->empty({N, 3 * C}, dt, MemCategory::other);
      kernels->attention_backward(dy, qkv, probs, sh.T, sh.heads, dqkv);
      const AttentionRef ref = attention_reference(sh, be->to_f64(qkv), be->to_f64(dy));
      const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
      CHECK(relative_error(be->to_f64(y), ref.y) <= tol);
      CHECK(relative_error(be->to_f64(probs), ref.probs) <= tol);
      CHECK(relative_error(be->to_f64(dqkv), ref.dqkv) <= tol);
      // The mask is exact, and the same inputs give bitwise the same outputs.
      const std::vector<double> p = be->to_f64(probs);
      for (std::int64_t m = 0; m < sh.sequences * sh.heads; ++m)
        for (std::int64_t i = 0; i < sh.T; ++i)
          for (std::int64_t j = i + 1; j < sh.T; ++j) CHECK(p[static_cast<std::size_t>((m * sh.T + i) * sh.T + j)] == 0.0);
      Tensor y2 = be->empty({N, C}, dt, MemCategory::other), probs2 = be->empty(probs.shape(), dt, MemCategory::other);
      Tensor dqkv2 = be->empty(dqkv.shape(), dt, MemCategory::other);
      kernels->attention_forward(qkv, sh.T, sh.heads, y2, probs2);
      kernels->attention_backward(dy, qkv, probs2, sh.T, sh.heads, dqkv2);
      CHECK(std::memcmp(y.raw_data(), y2.raw_data(), y.bytes()) == 0);
      CHECK(std::memcmp(dqkv.raw_data(), dqkv2.raw_data(), dqkv.bytes()) == 0);
    }
}

TEST_CASE("initial parameters are init_value's numbers in every mode (bitwise in f64, as floats in f32)",
          "[train][init]") {
  const int world = [] {
    int n = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
  }();
  const ModelSize size = model_size_for_world(world);
  std::vector<std::pair<ModeCase, MPI_Comm>> cases{{serial_case(), MPI_COMM_SELF}};
  for (const ModeCase& c : model_cases_for_world(world)) cases.emplace_back(c, MPI_COMM_WORLD);
  for (const auto& [c, comm] : cases)
    for (DType dt : {DType::f64, DType::f32}) {
      GptRun run(c, size.config, size.batch, comm, dt, 4321);
      const ParamMap values = run.gather(false);
      for (const ModelParam& p : run.model->parameters()) {
        const std::vector<double>& v = values.at(p.name());
        const Shape shape = p.checkpoint_shape();
        std::int64_t mismatches = 0;
        for (std::size_t k = 0; k < v.size(); ++k) {
          double ref = p.init.value;
          if (p.init.kind == InitSpec::Kind::normal) {
            // Checkpoints hold Linear weights [out, in]; init_value indexes the stored [in, out].
            const std::int64_t index = p.linear_weight ? static_cast<std::int64_t>(k) % shape[1] * shape[0] +
                                                             static_cast<std::int64_t>(k) / shape[1]
                                                       : static_cast<std::int64_t>(k);
            ref = init_reference(4321, p.name(), index, p.init.std);
          }
          if (dt == DType::f32) ref = static_cast<float>(ref);
          mismatches += std::memcmp(&v[k], &ref, sizeof ref) != 0;
        }
        INFO(c.label() << " " << dtype_name(dt) << " " << p.name());
        CHECK(mismatches == 0);
      }
    }
}

// bf16 and f16 storage (the host kernels' widened path): the same definitions from the values as
// stored; each output rounded once, so within a few units in the last place of the format.
namespace {

double unit_roundoff(DType dt) { return dt == DType::bf16 ? 0x1p-8 : 0x1p-11; }

}  // namespace

TEST_CASE("16-bit embedding: rows copied as stored, gradients added in token order into f32 or 16 bits",
          "[train][ops][lowp]") {
  auto be = make_host_backend();
  auto kernels = make_host_gpt_kernels(*be);
  for (DType dt : {DType::bf16, DType::f16})
    for (DType gt : {dt, DType::f32}) {
      INFO(dtype_name(dt) << " into " << dtype_name(gt));
      Tensor table = be->from_f64({30, 31, 40, 41, 50, 51}, {3, 2}, dt, MemCategory::other);
      const std::vector<std::int32_t> ids{4, 1, 3, 4, 6};
      Tensor out = be->empty({5, 2}, dt, MemCategory::other);
      kernels->embedding_forward(table, ids, 3, out);
      CHECK(be->to_f64(out) == std::vector<double>{40, 41, 0, 0, 30, 31, 40, 41, 0, 0});
      Tensor grad = be->from_f64({0.5, 0, 0, 0, 0, 0}, {3, 2}, gt, MemCategory::other);
      Tensor dy = be->from_f64({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {5, 2}, dt, MemCategory::other);
      kernels->embedding_backward(dy, ids, 3, grad);
      CHECK(be->to_f64(grad) == std::vector<double>{5.5, 6, 1 + 7, 2 + 8, 0, 0});
    }
  Tensor dy = be->zeros({1, 2}, DType::f32, MemCategory::other), grad = be->zeros({3, 2}, DType::bf16, MemCategory::other);
  const std::vector<std::int32_t> one{3};
  CHECK_THROWS_WITH(kernels->embedding_backward(dy, one, 3, grad), Catch::Contains("mixed dtypes f32 and bf16"));
}

TEST_CASE("16-bit cross-entropy over several row blocks matches float64 of the stored logits", "[train][ops][lowp]") {
  auto be = make_host_backend();
  auto kernels = make_host_gpt_kernels(*be);
  // 50021 columns (50000 valid) take 20 rows per block: 47 rows are three blocks, the last partial.
  const std::int64_t rows = 47, cols = 50021, valid = 50000, col0 = 1000;
  std::vector<std::int32_t> targets(rows);
  for (std::int64_t i = 0; i < rows; ++i) targets[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(col0 + (i * 7919) % (valid + 300) - 150);
  for (DType dt : {DType::bf16, DType::f16}) {
    INFO(dtype_name(dt));
    auto lv = uniform_values(static_cast<std::size_t>(rows * cols), 77);
    for (auto& v : lv) v *= 6.0;
    Tensor logits = be->from_f64(lv, {rows, cols}, dt, MemCategory::other);
    lv = be->to_f64(logits);
    Tensor mx = be->empty({rows}, DType::f64, MemCategory::other), sums = be->empty({rows, 2}, DType::f64, MemCategory::other);
    kernels->xent_row_max(logits, valid, mx);
    kernels->xent_partial_sums(logits, valid, mx, targets, col0, sums);
    const auto m = be->to_f64(mx), s = be->to_f64(sums);
    std::vector<double> lse(static_cast<std::size_t>(rows));
    double worst_sum = 0.0;
    for (std::int64_t i = 0; i < rows; ++i) {
      double top = -kInf, ref = 0.0;
      for (std::int64_t j = 0; j < valid; ++j) top = std::max(top, lv[static_cast<std::size_t>(i * cols + j)]);
      CHECK(m[static_cast<std::size_t>(i)] == top);
      for (std::int64_t j = 0; j < valid; ++j) ref += std::exp(lv[static_cast<std::size_t>(i * cols + j)] - top);
      worst_sum = std::max(worst_sum, std::abs(s[static_cast<std::size_t>(2 * i)] - ref) / ref);
      const std::int64_t t = targets[static_cast<std::size_t>(i)] - col0;
      CHECK(s[static_cast<std::size_t>(2 * i + 1)] == (t >= 0 && t < valid ? lv[static_cast<std::size_t>(i * cols + t)] : 0.0));
      lse[static_cast<std::size_t>(i)] = top + std::log(ref);
    }
    CHECK(worst_sum <= 1e-6);  // exps in f32 of the stored logits, summed in f64
    Tensor z = be->from_f64(lse, {rows}, DType::f64, MemCategory::other), d = be->empty({rows, cols}, dt, MemCategory::other);
    kernels->xent_backward(logits, valid, z, targets, col0, 0.5, d);
    std::vector<double> ref(static_cast<std::size_t>(rows * cols), 0.0);
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < valid; ++j)
        ref[static_cast<std::size_t>(i * cols + j)] =
            0.5 * (std::exp(lv[static_cast<std::size_t>(i * cols + j)] - lse[static_cast<std::size_t>(i)]) -
                   (col0 + j == targets[static_cast<std::size_t>(i)] ? 1.0 : 0.0));
    CHECK(relative_error(be->to_f64(d), ref) <= unit_roundoff(dt));
  }
}

TEST_CASE("16-bit host attention matches float64 attention of the stored values", "[train][ops][attention][lowp]") {
  auto be = make_host_backend();
  auto kernels = make_host_gpt_kernels(*be);
  const AttentionShape shapes[] = {{1, 1, 1, 1}, {2, 65, 2, 5}, {3, 130, 3, 8}};
  unsigned seed = 300;
  for (const AttentionShape& sh : shapes)
    for (DType dt : {DType::bf16, DType::f16}) {
      const std::int64_t C = sh.heads * sh.d, N = sh.sequences * sh.T;
      INFO("sequences " << sh.sequences << " T " << sh.T << " heads " << sh.heads << " d " << sh.d << " "
                        << dtype_name(dt));
      auto qv = uniform_values(static_cast<std::size_t>(N * 3 * C), seed++);
      for (auto& v : qv) v *= 2.0;
      Tensor qkv = be->from_f64(qv, {N, 3 * C}, dt, MemCategory::other);
      Tensor dy = be->from_f64(uniform_values(static_cast<std::size_t>(N * C), seed++), {N, C}, dt, MemCategory::other);
      Tensor y = be->empty({N, C}, dt, MemCategory::other);
      Tensor probs = be->empty({sh.sequences, sh.heads, sh.T, sh.T}, dt, MemCategory::other);
      kernels->attention_forward(qkv, sh.T, sh.heads, y, probs);
      Tensor dqkv = be->empty({N, 3 * C}, dt, MemCategory::other);
      kernels->attention_backward(dy, qkv, probs, sh.T, sh.heads, dqkv);
      const AttentionRef ref = attention_reference(sh, be->to_f64(qkv), be->to_f64(dy));
      const double u = unit_roundoff(dt);
      const double ey = relative_error(be->to_f64(y), ref.y), ep = relative_error(be->to_f64(probs), ref.probs);
      const double ed = relative_error(be->to_f64(dqkv), ref.dqkv);
      INFO("errors y " << ey << ", probs " << ep << ", dqkv " << ed << " (unit roundoff " << u << ")");
      CHECK(ey <= u);      // from the f32 probabilities, rounded once
      CHECK(ep <= u);
      CHECK(ed <= 4 * u);  // from the stored (rounded) probabilities
      const std::vector<double> p = be->to_f64(probs);
      for (std::int64_t m = 0; m < sh.sequences * sh.heads; ++m)
        for (std::int64_t i = 0; i < sh.T; ++i)
          for (std::int64_t j = i + 1; j < sh.T; ++j) CHECK(p[static_cast<std::size_t>((m * sh.T + i) * sh.T + j)] == 0.0);
    }
}
