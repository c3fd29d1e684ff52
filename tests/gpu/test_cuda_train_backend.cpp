// The GPT kernels (model/gpt_kernels.hpp) and AdamW on CUDA against the host: embedding (with repeated and
// out-of-range ids), causal attention forward/backward, the vocabulary-parallel cross-entropy
// pieces, AdamW.  f64 to 1e-12, f32 to 1e-5 (relative, infinity norm).
#include <catch2/catch.hpp>
#include <cmath>

#include "cuda/cuda_gpt_kernels.hpp"
#include "gpu/gpu_test_support.hpp"

using namespace mdtp;
using namespace mdtp::gpu_test;

namespace {

struct Backends {
  std::unique_ptr<Backend> host = make_host_backend();
  std::unique_ptr<CudaBackend> dev = make_cuda_backend();
  // The model-level GPT kernels of each backend (model/gpt_kernels.hpp).
  std::unique_ptr<GptKernels> host_kernels = make_host_gpt_kernels(*host);
  std::unique_ptr<GptKernels> dev_kernels = make_cuda_gpt_kernels(*dev);
  void check(const Twin& t, DType dtype, const char* what) const {
    INFO(what << " (" << dtype_name(dtype) << ")");
    CHECK(rel_inf(dev->to_f64(t.dev), host->to_f64(t.host)) <= tolerance(dtype));
  }
};

}  // namespace

TEST_CASE("CUDA training ops: embedding lookup and gradient", "[gpu][train]") {
  Backends b;
  // This rank holds table rows [3, 10); ids outside give zero rows / no gradient; 3 repeats.
  const std::vector<std::int32_t> ids{3, 9, 2, 3, 12, 5, 3, 9, 10, 4, 0};
  const std::int64_t first_row = 3, rows = 7, cols = 6, n = static_cast<std::int64_t>(ids.size());
  for (DType dt : {DType::f64, DType::f32}) {
    Twin table = random_twin(*b.host, *b.dev, {rows, cols}, dt, 100);
    Twin out = random_twin(*b.host, *b.dev, {n, cols}, dt, 101);
    b.host_kernels->embedding_forward(table.host, ids, first_row, out.host);
    b.dev_kernels->embedding_forward(table.dev, ids, first_row, out.dev);
    b.check(out, dt, "embedding_forward");
    Twin dy = random_twin(*b.host, *b.dev, {n, cols}, dt, 102);
    Twin grad = random_twin(*b.host, *b.dev, {rows, cols}, dt, 103);  // accumulated into
    b.host_kernels->embedding_backward(dy.host, ids, first_row, grad.host);
    b.dev_kernels->embedding_backward(dy.dev, ids, first_row, grad.dev);
    b.check(grad, dt, "embedding_backward");
  }
}

TEST_CASE("CUDA training ops: causal attention forward and backward", "[gpu][train][attention]") {
  Backends b;
  const std::int64_t seq_len = 5, n_head = 3, d = 4, sequences = 2;
  const std::int64_t N = sequences * seq_len, C = n_head * d;
  for (DType dt : {DType::f64, DType::f32}) {
    Twin qkv = random_twin(*b.host, *b.dev, {N, 3 * C}, dt, 110);
    Twin y = random_twin(*b.host, *b.dev, {N, C}, dt, 111);
    Twin probs = random_twin(*b.host, *b.dev, {sequences, n_head, seq_len, seq_len}, dt, 112);
    b.host_kernels->attention_forward(qkv.host, seq_len, n_head, y.host, probs.host);
    b.dev_kernels->attention_forward(qkv.dev, seq_len, n_head, y.dev, probs.dev);
    b.check(probs, dt, "attention_forward probs");
    b.check(y, dt, "attention_forward y");
    Twin dy = random_twin(*b.host, *b.dev, {N, C}, dt, 113);
    Twin dqkv = random_twin(*b.host, *b.dev, {N, 3 * C}, dt, 114);  // overwritten
    b.host_kernels->attention_backward(dy.host, qkv.host, probs.host, seq_len, n_head, dqkv.host);
    b.dev_kernels->attention_backward(dy.dev, qkv.dev, probs.dev, seq_len, n_head, dqkv.dev);
    b.check(dqkv, dt, "attention_backward");
  }
}

TEST_CASE("CUDA training ops: vocabulary-parallel cross-entropy pieces", "[gpu][train][xent]") {
  Backends b;
  // This slice holds vocabulary [9, 18), of which the first 7 columns are real.
  const std::int64_t rows = 6, cols = 9, valid = 7, col0 = 9;
  const std::vector<std::int32_t> targets{9, 15, 16, 3, 12, 20};  // in slice, in, padding, before, in, after
  for (DType dt : {DType::f64, DType::f32}) {
    Twin logits = twin(*b.host, *b.dev, random_values(rows * cols, 120, -3.0, 3.0), {rows, cols}, dt);
    Twin mx = random_twin(*b.host, *b.dev, {rows}, DType::f64, 121);
    b.host_kernels->xent_row_max(logits.host, valid, mx.host);
    b.dev_kernels->xent_row_max(logits.dev, valid, mx.dev);
    b.check(mx, DType::f64, "xent_row_max");
    Twin sums = random_twin(*b.host, *b.dev, {rows, 2}, DType::f64, 122);
    b.host_kernels->xent_partial_sums(logits.host, valid, mx.host, targets, col0, sums.host);
    b.dev_kernels->xent_partial_sums(logits.dev, valid, mx.dev, targets, col0, sums.dev);
    // The sums are f64, but each exp is computed in the logits' dtype on the host (vectorised in T)
    // and in f64 on the device: they agree to the logits' precision, not to f64's.
    b.check(sums, dt, "xent_partial_sums");
    auto m = b.host->to_f64(mx.host), s = b.host->to_f64(sums.host);
    std::vector<double> lse(rows);
    for (std::int64_t i = 0; i < rows; ++i) lse[i] = m[i] + std::log(s[2 * i]);
    Twin l = twin(*b.host, *b.dev, lse, {rows}, DType::f64);
    Twin dl = random_twin(*b.host, *b.dev, {rows, cols}, dt, 123);
    b.host_kernels->xent_backward(logits.host, valid, l.host, targets, col0, 0.25, dl.host);
    b.dev_kernels->xent_backward(logits.dev, valid, l.dev, targets, col0, 0.25, dl.dev);
    b.check(dl, dt, "xent_backward");
  }
}

TEST_CASE("CUDA training ops: AdamW as the host backend", "[gpu][train]") {
  Backends b;
  AdamWStep st;
  st.lr = 3e-3;
  st.weight_decay = 0.1;
  st.grad_scale = 0.7;
  for (DType dt : {DType::f64, DType::f32}) {
    Twin p = random_twin(*b.host, *b.dev, {31, 9}, dt, 130);
    Twin m = twin(*b.host, *b.dev, std::vector<double>(31 * 9, 0.0), {31, 9}, dt);
    Twin v = twin(*b.host, *b.dev, std::vector<double>(31 * 9, 0.0), {31, 9}, dt);
    for (std::int64_t s = 1; s <= 3; ++s) {
      Twin g = random_twin(*b.host, *b.dev, {31, 9}, dt, 131 + static_cast<unsigned>(s));
      st.step = s;
      b.host->adamw_update(p.host, g.host, m.host, v.host, st);
      b.dev->adamw_update(p.dev, g.dev, m.dev, v.dev, st);
    }
    b.check(p, dt, "adamw param");
    b.check(m, dt, "adamw m");
    b.check(v, dt, "adamw v");
  }
}

TEST_CASE("CUDA training ops: embedding gradient of a row wider than the y grid limit", "[gpu][train]") {
  // embedding_backward runs column chunks of kThreads = 256 along the grid's y dimension, which
  // CUDA caps at 65535 blocks: a row of more than 65535·256 columns needs the kernel's stride.
  // Quarters below 4 are exact in f32 and their sums too, so the result must match exactly.
  Backends b;
  const std::int64_t cols = 65535LL * 256 + 300;
  const std::vector<std::int32_t> ids{0, 0};
  std::vector<double> dy(static_cast<std::size_t>(2 * cols)), want(static_cast<std::size_t>(cols));
  for (std::int64_t j = 0; j < cols; ++j) {
    dy[j] = static_cast<double>(j % 13) * 0.25;
    dy[cols + j] = static_cast<double>(j % 5) * 0.25;
    want[j] = 1.0 + dy[j] + dy[cols + j];
  }
  Tensor d = b.dev->from_f64(dy, {2, cols}, DType::f32, MemCategory::activations);
  Tensor grad = b.dev->from_f64(std::vector<double>(static_cast<std::size_t>(cols), 1.0), {1, cols}, DType::f32,
                                MemCategory::gradients);
  b.dev_kernels->embedding_backward(d, ids, 0, grad);
  const bool exact = b.dev->to_f64(grad) == want;  // not CHECK(a == b): Catch would print 16M values
  CHECK(exact);
}
