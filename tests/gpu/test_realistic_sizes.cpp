// The GPU kernels at the sizes a GPT actually runs them at, in f32 and bf16, against float64
// references: LayerNorm at H = 2048, causal softmax and attention at T = 1024, cross-entropy
// (whole rows, and the vocabulary-parallel pieces) and the embedding over a 50304-token
// vocabulary, AdamW over 4M parameters.  The small-shape suites check the semantics; these check
// what only size exposes: reductions over thousands of terms, grid limits, long runs of repeated
// tokens, 16-bit rounding against realistic magnitudes.
//
// Tolerances, as ‖got - ref‖∞ / ‖ref‖∞ (rel_inf): f32 1e-5; bf16 1e-2 (8 significant bits: one
// rounding is 2^-9 ≈ 2e-3; the ops round their output once, or a few times in attention); f64
// statistics (LayerNorm mean/rstd and sums, cross-entropy lse and loss) 1e-12 where the device
// computes them in double, 1e-5 where from float exps.  A host emulation of the attention path
// (f32 accumulation, bf16 rounding at the same points, sequential sums) gave ≤ 4.8e-3 in bf16
// (dQ, dK) and ≤ 2.1e-6 in f32 at these shapes: about 2x and 5x margin.
//
// Each reference starts from the inputs as stored in the tested dtype (as_stored), and backward
// references from the device's own forward outputs (xhat, probs, y), so that every check measures
// one op, not the rounding of what it was given.  Each check prints its measured error: the first
// runs on a GPU show the margins.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <string>

#include "cuda/train_ops.hpp"
#include "cuda/cuda_gpt_kernels.hpp"
#include "gpu/gpu_test_support.hpp"
#include "gpu/reference_ops.hpp"

using namespace mdtp;
using namespace mdtp::gpu_test;

namespace {

constexpr double kF32 = 1e-5;
constexpr double kBf16 = 1e-2;
constexpr double kStatsDouble = 1e-12;  // f64 statistics the device accumulates in double
constexpr double kStatsFloatExp = 1e-5;  // f64 statistics built from float exps

double tol(DType dt) { return dt == DType::bf16 ? kBf16 : kF32; }

void check_close(const std::vector<double>& got, const std::vector<double>& ref, double tolerance,
                 const std::string& what) {
  const double err = rel_inf(got, ref);
  std::printf("  %-52s rel err %.2e  (tolerance %.0e)\n", what.c_str(), err, tolerance);
  std::fflush(stdout);
  INFO(what << ": ‖got - ref‖∞ / ‖ref‖∞ = " << err << ", tolerance " << tolerance);
  CHECK(err <= tolerance);
}

std::string named(const char* what, DType dt) { return std::string(what) + " (" + dtype_name(dt) + ")"; }

struct Backends {
  std::unique_ptr<Backend> host = make_host_backend();  // the float64 references
  std::unique_ptr<CudaBackend> dev = make_cuda_backend();
  // The model-level GPT kernels of each backend (model/gpt_kernels.hpp).
  std::unique_ptr<GptKernels> host_kernels = make_host_gpt_kernels(*host);
  std::unique_ptr<GptKernels> dev_kernels = make_cuda_gpt_kernels(*dev);
  Tensor host64(const std::vector<double>& v, const Shape& shape) const {
    return host->from_f64(v, shape, DType::f64, MemCategory::other);
  }
  Tensor device(const std::vector<double>& v, const Shape& shape, DType dt) const {
    return dev->from_f64(v, shape, dt, MemCategory::other);
  }
};

}  // namespace

TEST_CASE("realistic sizes: LayerNorm forward and backward at H = 2048", "[gpu][realistic][layernorm]") {
  Backends b;
  const std::int64_t rows = 1024, H = 2048;
  for (DType dt : {DType::f32, DType::bf16}) {
    const auto x = as_stored(random_values(rows * H, 200, 2.0, 5.0), dt);  // a mean far from 0
    const auto gamma = as_stored(random_values(H, 201), dt), beta = as_stored(random_values(H, 202), dt);
    const auto dy = as_stored(random_values(rows * H, 203), dt);

    Tensor X = b.device(x, {rows, H}, dt), G = b.device(gamma, {H}, dt), B = b.device(beta, {H}, dt);
    Tensor stats = b.dev->empty({rows, 2}, DType::f64, MemCategory::other);
    Tensor mr = b.dev->empty({rows, 2}, DType::f64, MemCategory::other);
    Tensor xhat = b.dev->empty({rows, H}, dt, MemCategory::other), y = b.dev->empty({rows, H}, dt, MemCategory::other);
    b.dev->row_mean_m2(X, stats);
    b.dev->merge_row_stats(stats, 1, H, 1e-5, mr);
    b.dev->layernorm_apply(X, mr, G, B, xhat, y);
    Tensor DY = b.device(dy, {rows, H}, dt);
    Tensor sums = b.dev->empty({rows, 2}, DType::f64, MemCategory::other);
    Tensor dx = b.dev->empty({rows, H}, dt, MemCategory::other);
    Tensor dgamma = b.dev->zeros({H}, dt, MemCategory::other), dbeta = b.dev->zeros({H}, dt, MemCategory::other);
    b.dev->layernorm_backward_sums(DY, xhat, G, sums);
    b.dev->layernorm_backward(DY, xhat, G, mr, sums, H, dx, dgamma, dbeta);

    Tensor hx = b.host64(x, {rows, H}), hg = b.host64(gamma, {H}), hb = b.host64(beta, {H});
    Tensor hstats = b.host64(std::vector<double>(rows * 2), {rows, 2}), hmr = b.host64(std::vector<double>(rows * 2), {rows, 2});
    Tensor hxhat = b.host64(std::vector<double>(rows * H), {rows, H}), hy = b.host64(std::vector<double>(rows * H), {rows, H});
    b.host->row_mean_m2(hx, hstats);
    b.host->merge_row_stats(hstats, 1, H, 1e-5, hmr);
    b.host->layernorm_apply(hx, hmr, hg, hb, hxhat, hy);
    check_close(b.dev->to_f64(mr), b.host->to_f64(hmr), kStatsDouble, named("LayerNorm mean, rstd", dt));
    check_close(b.dev->to_f64(xhat), b.host->to_f64(hxhat), tol(dt), named("LayerNorm xhat", dt));
    check_close(b.dev->to_f64(y), b.host->to_f64(hy), tol(dt), named("LayerNorm y", dt));

    // Backward from the device's xhat, as stored.
    Tensor dev_xhat = b.host64(b.dev->to_f64(xhat), {rows, H}), hdy = b.host64(dy, {rows, H});
    Tensor hsums = b.host64(std::vector<double>(rows * 2), {rows, 2});
    Tensor hdx = b.host64(std::vector<double>(rows * H), {rows, H});
    Tensor hdg = b.host64(std::vector<double>(H, 0.0), {H}), hdb = b.host64(std::vector<double>(H, 0.0), {H});
    b.host->layernorm_backward_sums(hdy, dev_xhat, hg, hsums);
    b.host->layernorm_backward(hdy, dev_xhat, hg, hmr, hsums, H, hdx, hdg, hdb);
    check_close(b.dev->to_f64(sums), b.host->to_f64(hsums), kStatsDouble, named("LayerNorm backward sums", dt));
    check_close(b.dev->to_f64(dx), b.host->to_f64(hdx), tol(dt), named("LayerNorm dx", dt));
    check_close(b.dev->to_f64(dgamma), b.host->to_f64(hdg), tol(dt), named("LayerNorm dgamma (1024 rows)", dt));
    check_close(b.dev->to_f64(dbeta), b.host->to_f64(hdb), tol(dt), named("LayerNorm dbeta (1024 rows)", dt));
  }
}

TEST_CASE("realistic sizes: causal softmax over T = 1024 and its backward", "[gpu][realistic][softmax]") {
  Backends b;
  const std::int64_t heads = 4, T = 1024, rows = heads * T, n = rows * T;
  for (DType dt : {DType::f32, DType::bf16}) {
    const auto x = as_stored(random_values(n, 210, -4.0, 4.0), dt);
    Tensor X = b.device(x, {heads, T, T}, dt), Y = b.dev->empty({heads, T, T}, dt, MemCategory::other);
    softmax_rows(*b.dev, X, Y, true);
    const auto y = b.dev->to_f64(Y);
    check_close(y, softmax_ref(x, rows, T, T), tol(dt), named("causal softmax [4, 1024, 1024]", dt));
    const auto dy = as_stored(random_values(n, 211), dt);
    Tensor DY = b.device(dy, {heads, T, T}, dt), DX = b.dev->empty({heads, T, T}, dt, MemCategory::other);
    softmax_rows_backward(*b.dev, Y, DY, DX);
    check_close(b.dev->to_f64(DX), softmax_backward_ref(y, dy, rows, T), tol(dt), named("softmax backward", dt));
  }
}

TEST_CASE("realistic sizes: cross-entropy over a 50304-token vocabulary", "[gpu][realistic][xent]") {
  Backends b;
  const std::int64_t rows = 128, V = 50304;
  std::vector<std::int32_t> targets(rows);
  for (std::int64_t i = 0; i < rows; ++i) targets[i] = static_cast<std::int32_t>((i * 7919 + 13) % V);
  targets[5] = targets[77] = -1;  // ignored (padding)
  const double scale = 1.0 / (rows - 2);
  DeviceIndices t = upload_indices(*b.dev, targets);
  for (DType dt : {DType::f32, DType::bf16}) {
    const auto logits = as_stored(random_values(rows * V, 220, -4.0, 4.0), dt);
    Tensor L = b.device(logits, {rows, V}, dt);
    Tensor losses = b.dev->empty({rows}, DType::f64, MemCategory::other), lse = b.dev->empty({rows}, DType::f64, MemCategory::other);
    cross_entropy_forward(*b.dev, L, t, losses, lse);
    const CrossEntropyRef ref = cross_entropy_ref(logits, targets, V, scale);
    check_close(b.dev->to_f64(lse), ref.lse, kStatsFloatExp, named("cross-entropy lse [128, 50304]", dt));
    check_close(b.dev->to_f64(losses), ref.loss, kStatsFloatExp, named("cross-entropy loss", dt));
    Tensor DL = b.dev->empty({rows, V}, dt, MemCategory::other);
    cross_entropy_backward(*b.dev, L, t, lse, scale, DL);
    check_close(b.dev->to_f64(DL), ref.dlogits, tol(dt), named("cross-entropy dlogits", dt));
  }
}

TEST_CASE("realistic sizes: vocabulary-parallel cross-entropy pieces, half of 50304", "[gpu][realistic][xent]") {
  // Rank 1 of a 2-way vocabulary split: entries [25152, 50304), padded by 64 columns.
  Backends b;
  const std::int64_t rows = 128, valid = 25152, cols = valid + 64, col0 = 25152;
  std::vector<std::int32_t> targets(rows);
  for (std::int64_t i = 0; i < rows; ++i) targets[i] = static_cast<std::int32_t>((i * 7919 + 13) % 50304);
  for (DType dt : {DType::f32, DType::bf16}) {
    const auto logits = as_stored(random_values(rows * cols, 225, -4.0, 4.0), dt);
    Tensor L = b.device(logits, {rows, cols}, dt);
    Tensor mx = b.dev->empty({rows}, DType::f64, MemCategory::other), sums = b.dev->empty({rows, 2}, DType::f64, MemCategory::other);
    b.dev_kernels->xent_row_max(L, valid, mx);
    b.dev_kernels->xent_partial_sums(L, valid, mx, targets, col0, sums);
    Tensor hl = b.host64(logits, {rows, cols});
    Tensor hmx = b.host64(std::vector<double>(rows), {rows}), hsums = b.host64(std::vector<double>(rows * 2), {rows, 2});
    b.host_kernels->xent_row_max(hl, valid, hmx);
    b.host_kernels->xent_partial_sums(hl, valid, hmx, targets, col0, hsums);
    check_close(b.dev->to_f64(mx), b.host->to_f64(hmx), kStatsDouble, named("xent_row_max [128, 25216]", dt));
    check_close(b.dev->to_f64(sums), b.host->to_f64(hsums), kStatsDouble, named("xent_partial_sums", dt));
    const auto m = b.host->to_f64(hmx), s = b.host->to_f64(hsums);
    std::vector<double> lse(rows);
    for (std::int64_t i = 0; i < rows; ++i) lse[i] = m[i] + std::log(s[2 * i]);
    Tensor LSE = b.device(lse, {rows}, DType::f64), DL = b.dev->empty({rows, cols}, dt, MemCategory::other);
    Tensor hdl = b.host64(std::vector<double>(rows * cols), {rows, cols});
    b.dev_kernels->xent_backward(L, valid, LSE, targets, col0, 1.0 / rows, DL);
    b.host_kernels->xent_backward(hl, valid, b.host64(lse, {rows}), targets, col0, 1.0 / rows, hdl);
    check_close(b.dev->to_f64(DL), b.host->to_f64(hdl), tol(dt), named("xent_backward", dt));
  }
}

TEST_CASE("realistic sizes: causal attention at T = 1024", "[gpu][realistic][attention]") {
  Backends b;
  const std::int64_t T = 1024, n_head = 2, d = 64, C = n_head * d, N = T;  // one sequence
  for (DType dt : {DType::f32, DType::bf16}) {
    const auto qkv = as_stored(random_values(N * 3 * C, 230), dt);
    const auto dy = as_stored(random_values(N * C, 231), dt);
    Tensor QKV = b.device(qkv, {N, 3 * C}, dt);
    Tensor Y = b.dev->empty({N, C}, dt, MemCategory::other), P = b.dev->empty({1, n_head, T, T}, dt, MemCategory::other);
    b.dev_kernels->attention_forward(QKV, T, n_head, Y, P);
    Tensor hqkv = b.host64(qkv, {N, 3 * C});
    Tensor hy = b.host64(std::vector<double>(N * C), {N, C}), hp = b.host64(std::vector<double>(n_head * T * T), {1, n_head, T, T});
    b.host_kernels->attention_forward(hqkv, T, n_head, hy, hp);
    check_close(b.dev->to_f64(P), b.host->to_f64(hp), tol(dt), named("attention probs [2, 1024, 1024]", dt));
    check_close(b.dev->to_f64(Y), b.host->to_f64(hy), tol(dt), named("attention y", dt));

    // Backward from the device's probabilities, as stored.
    Tensor DY = b.device(dy, {N, C}, dt), DQKV = b.dev->empty({N, 3 * C}, dt, MemCategory::other);
    b.dev_kernels->attention_backward(DY, QKV, P, T, n_head, DQKV);
    Tensor hdqkv = b.host64(std::vector<double>(N * 3 * C), {N, 3 * C});
    b.host_kernels->attention_backward(b.host64(dy, {N, C}), hqkv, b.host64(b.dev->to_f64(P), {1, n_head, T, T}), T, n_head, hdqkv);
    const auto got = b.dev->to_f64(DQKV), ref = b.host->to_f64(hdqkv);
    // dQ, dK, dV separately: each has its own scale, and one must not hide another's error.
    for (int part = 0; part < 3; ++part) {
      std::vector<double> g, r;
      for (std::int64_t i = 0; i < N; ++i)
        for (std::int64_t j = part * C; j < (part + 1) * C; ++j) {
          g.push_back(got[i * 3 * C + j]);
          r.push_back(ref[i * 3 * C + j]);
        }
      check_close(g, r, tol(dt), named(part == 0 ? "attention dQ" : part == 1 ? "attention dK" : "attention dV", dt));
    }
  }
}

TEST_CASE("realistic sizes: embedding over a 50304-token vocabulary, H = 1024", "[gpu][realistic][embedding]") {
  // Rank 1 of a 2-way vocabulary split holds rows [25152, 50304).  8 sequences of 1024 tokens,
  // skewed towards the top of the vocabulary: ~80% fall in this slice and the most frequent ids
  // repeat hundreds of times (long per-row runs in the backward).
  Backends b;
  const std::int64_t V = 50304, H = 1024, first_row = V / 2, rows = V - first_row, n = 8 * 1024;
  std::vector<std::int32_t> ids(n);
  const auto u = random_values(n, 240, 0.0, 1.0);
  for (std::int64_t i = 0; i < n; ++i)
    ids[i] = static_cast<std::int32_t>(V - 1 - static_cast<std::int64_t>(static_cast<double>(V) * u[i] * u[i] * u[i]));
  for (DType dt : {DType::f32, DType::bf16}) {
    const auto table = as_stored(random_values(rows * H, 241), dt);
    Tensor W = b.device(table, {rows, H}, dt), out = b.dev->empty({n, H}, dt, MemCategory::other);
    b.dev_kernels->embedding_forward(W, ids, first_row, out);
    Tensor hout = b.host64(std::vector<double>(n * H), {n, H});
    b.host_kernels->embedding_forward(b.host64(table, {rows, H}), ids, first_row, hout);
    const bool lookup_exact = b.dev->to_f64(out) == b.host->to_f64(hout);  // not CHECK(a == b): 8M values
    CHECK(lookup_exact);

    const auto dy = as_stored(random_values(n * H, 242), dt);
    Tensor grad = b.dev->zeros({rows, H}, dt, MemCategory::other);
    b.dev_kernels->embedding_backward(b.device(dy, {n, H}, dt), ids, first_row, grad);
    Tensor hgrad = b.host64(std::vector<double>(rows * H, 0.0), {rows, H});
    b.host_kernels->embedding_backward(b.host64(dy, {n, H}), ids, first_row, hgrad);
    check_close(b.dev->to_f64(grad), b.host->to_f64(hgrad), tol(dt), named("embedding gradient [25152, 1024]", dt));
  }
}

TEST_CASE("realistic sizes: AdamW over 4M parameters", "[gpu][realistic][adamw]") {
  Backends b;
  const std::int64_t rows = 1024, cols = 4096, n = rows * cols;
  AdamWStep cfg;
  cfg.lr = 3e-4;
  cfg.weight_decay = 0.1;
  cfg.grad_scale = 0.8;
  const auto w0 = random_values(n, 250);
  std::vector<std::vector<double>> grads;
  for (int s = 0; s < 3; ++s) grads.push_back(random_values(n, 251 + static_cast<unsigned>(s), -1e-2, 1e-2));

  // train_ops' adamw_update: f32 in place, and bf16 parameters with f32 master weights and state.
  for (DType dt : {DType::f32, DType::bf16}) {
    const DType state = DType::f32;
    Tensor param = b.device(w0, {rows, cols}, dt);
    Tensor master = dt == DType::bf16 ? b.device(w0, {rows, cols}, state) : Tensor();
    Tensor m = b.dev->zeros({rows, cols}, state, MemCategory::other), v = b.dev->zeros({rows, cols}, state, MemCategory::other);
    std::vector<std::vector<double>> used;
    for (int s = 1; s <= 3; ++s) {
      used.push_back(as_stored(grads[static_cast<std::size_t>(s - 1)], dt));
      cfg.step = s;
      adamw_update(*b.dev, param, b.device(used.back(), {rows, cols}, dt), master, m, v, cfg);
    }
    std::vector<double> w = as_stored(w0, state), rm(static_cast<std::size_t>(n), 0.0), rv(static_cast<std::size_t>(n), 0.0);
    adamw_ref(cfg, 1, used, w, rm, rv);
    check_close(b.dev->to_f64(m), rm, kF32, named("train_ops adamw_update m", dt));
    check_close(b.dev->to_f64(v), rv, kF32, named("train_ops adamw_update v", dt));
    if (master.defined()) check_close(b.dev->to_f64(master), w, kF32, named("train_ops adamw_update master weights", dt));
    check_close(b.dev->to_f64(param), w, tol(dt), named("train_ops adamw_update parameter", dt));
  }

  // The Backend's same-dtype update against the host in f64; a bf16 parameter is refused there (its
  // moments would be bf16: 16-bit parameters take the master-weight update above).
  {
    Tensor p16 = b.dev->zeros({rows, cols}, DType::bf16, MemCategory::parameters);
    CHECK_THROWS_WITH(b.dev->adamw_update(p16, p16, p16, p16, cfg), Catch::Contains("needs f32 or f64; got bf16"));
  }
  for (DType dt : {DType::f32}) {
    Tensor param = b.device(w0, {rows, cols}, dt);
    Tensor m = b.dev->zeros({rows, cols}, dt, MemCategory::other), v = b.dev->zeros({rows, cols}, dt, MemCategory::other);
    Tensor hp = b.host64(as_stored(w0, dt), {rows, cols});
    Tensor hm = b.host64(std::vector<double>(n, 0.0), {rows, cols}), hv = b.host64(std::vector<double>(n, 0.0), {rows, cols});
    for (int s = 1; s <= 3; ++s) {
      const auto g = as_stored(grads[static_cast<std::size_t>(s - 1)], dt);
      cfg.step = s;
      b.dev->adamw_update(param, b.device(g, {rows, cols}, dt), m, v, cfg);
      b.host->adamw_update(hp, b.host64(g, {rows, cols}), hm, hv, cfg);
    }
    check_close(b.dev->to_f64(m), b.host->to_f64(hm), tol(dt), named("Backend::adamw_update m", dt));
    check_close(b.dev->to_f64(v), b.host->to_f64(hv), tol(dt), named("Backend::adamw_update v", dt));
    check_close(b.dev->to_f64(param), b.host->to_f64(hp), tol(dt), named("Backend::adamw_update parameter", dt));
  }
}
