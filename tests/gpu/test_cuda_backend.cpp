// CudaBackend against the host backend, op by op, on non-square shapes: f64 to 1e-12 and f32 to
// 1e-5 (relative, infinity norm); bf16/f16 GEMM against an f64 GEMM of the rounded inputs to 1e-2.
#include <catch2/catch.hpp>
#include <tuple>

#include "cuda/cuda_backend.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_gemm.hpp"
#include "gpu/gpu_test_support.hpp"

using namespace mdtp;
using namespace mdtp::gpu_test;

namespace {

struct Backends {
  std::unique_ptr<Backend> host = make_host_backend();
  std::unique_ptr<CudaBackend> dev = make_cuda_backend();
};

// Host and device results of one tensor, compared.
void check_same(const Backends& b, const Twin& t, DType dtype, const char* what) {
  INFO(what << " (" << dtype_name(dtype) << ")");
  CHECK(rel_inf(b.dev->to_f64(t.dev), b.host->to_f64(t.host)) <= tolerance(dtype));
}

}  // namespace

TEST_CASE("CUDA backend: transfers, fill, copy, copy_block", "[gpu][backend]") {
  Backends b;
  for (DType dt : {DType::f64, DType::f32, DType::bf16, DType::f16}) {
    INFO(dtype_name(dt));
    // Halves and small integers are exact in every dtype: the round trip must be exact.
    std::vector<double> v(37 * 11);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(static_cast<int>(i % 64) - 32) * 0.5;
    Tensor x = b.dev->from_f64(v, {37, 11}, dt, MemCategory::activations);
    CHECK(x.device() == DeviceKind::cuda);
    CHECK(b.dev->to_f64(x) == v);
    b.dev->fill(x, 1.5);
    CHECK(b.dev->to_f64(x) == std::vector<double>(v.size(), 1.5));
  }
  for (DType dt : {DType::f64, DType::f32}) {
    Twin src = random_twin(*b.host, *b.dev, {13, 17}, dt, 1);
    Twin dst = random_twin(*b.host, *b.dev, {9, 21}, dt, 2);
    b.host->copy_block(src.host, 2, 3, dst.host, 1, 4, 7, 11);
    b.dev->copy_block(src.dev, 2, 3, dst.dev, 1, 4, 7, 11);
    check_same(b, dst, dt, "copy_block");
    Twin c = random_twin(*b.host, *b.dev, {13, 17}, dt, 3);
    b.host->copy(src.host, c.host);
    b.dev->copy(src.dev, c.dev);
    check_same(b, c, dt, "copy");
    Tensor rows = src.dev.row_slice(4, 9);  // a view at an offset
    CHECK(b.dev->to_f64(b.dev->clone(rows, MemCategory::other)) == b.host->to_f64(src.host.row_slice(4, 9)));
  }
}

TEST_CASE("CUDA backend: gemm with every transpose combination", "[gpu][backend][gemm]") {
  Backends b;
  const std::int64_t m = 37, k = 29, n = 53;
  for (DType dt : {DType::f64, DType::f32})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (auto [alpha, beta] : {std::pair{1.0, 0.0}, {0.7, -1.3}, {-0.5, 1.0}}) {
          INFO("ta=" << ta << " tb=" << tb << " alpha=" << alpha << " beta=" << beta);
          Twin a = random_twin(*b.host, *b.dev, ta ? Shape{k, m} : Shape{m, k}, dt, 10);
          Twin bb = random_twin(*b.host, *b.dev, tb ? Shape{n, k} : Shape{k, n}, dt, 11);
          Twin c = random_twin(*b.host, *b.dev, {m, n}, dt, 12);
          b.host->gemm(ta, tb, alpha, a.host, bb.host, beta, c.host);
          b.dev->gemm(ta, tb, alpha, a.dev, bb.dev, beta, c.dev);
          check_same(b, c, dt, "gemm");
        }
  // An empty inner dimension scales C, as on the host.
  Twin a = random_twin(*b.host, *b.dev, {5, 0}, DType::f64, 1);
  Twin bb = random_twin(*b.host, *b.dev, {0, 3}, DType::f64, 2);
  Twin c = random_twin(*b.host, *b.dev, {5, 3}, DType::f64, 3);
  b.host->gemm(false, false, 1.0, a.host, bb.host, 0.5, c.host);
  b.dev->gemm(false, false, 1.0, a.dev, bb.dev, 0.5, c.dev);
  check_same(b, c, DType::f64, "gemm k=0");
  Tensor x = b.dev->zeros({3, 4}, DType::f32, MemCategory::other);
  Tensor y = b.dev->zeros({5, 2}, DType::f32, MemCategory::other);
  Tensor z = b.dev->zeros({3, 2}, DType::f32, MemCategory::other);
  CHECK_THROWS_WITH(b.dev->gemm(false, false, 1, x, y, 0, z), Catch::Contains("op(A) is 3x4, op(B) is 5x2"));
}

TEST_CASE("CUDA backend: bf16/f16 gemm accumulates in fp32", "[gpu][backend][gemm]") {
  Backends b;
  const std::int64_t m = 67, k = 131, n = 45;
  for (DType dt : {DType::bf16, DType::f16})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        INFO(dtype_name(dt) << " ta=" << ta << " tb=" << tb);
        Tensor a = b.dev->from_f64(random_values(m * k, 20), ta ? Shape{k, m} : Shape{m, k}, dt, MemCategory::other);
        Tensor bb = b.dev->from_f64(random_values(k * n, 21), tb ? Shape{n, k} : Shape{k, n}, dt, MemCategory::other);
        Tensor c = b.dev->from_f64(random_values(m * n, 22), {m, n}, dt, MemCategory::other);
        // The reference starts from the values as rounded to the 16-bit type.
        Tensor ha = b.host->from_f64(b.dev->to_f64(a), a.shape(), DType::f64, MemCategory::other);
        Tensor hb = b.host->from_f64(b.dev->to_f64(bb), bb.shape(), DType::f64, MemCategory::other);
        Tensor hc = b.host->from_f64(b.dev->to_f64(c), c.shape(), DType::f64, MemCategory::other);
        b.host->gemm(ta, tb, 0.75, ha, hb, 0.5, hc);
        b.dev->gemm(ta, tb, 0.75, a, bb, 0.5, c);
        CHECK(rel_inf(b.dev->to_f64(c), b.host->to_f64(hc)) <= 1e-2);
      }
}

TEST_CASE("CUDA backend: f32 GEMM is f32, whatever the cuBLAS handle was set to", "[gpu][backend][gemm]") {
  // At k = 1024 TF32 (10-bit mantissa inputs) errs by ~1e-3 relative; f32 by ~1e-6.  The backend
  // sets the math mode on every GEMM, so a handle left in TF32 mode by someone else changes
  // nothing, and allow_tf32 is the only way to TF32.
  CHECK(gemm_math_mode(DType::f32, false) ==
        (CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
  CHECK(gemm_math_mode(DType::f32, true) ==
        (CUBLAS_TF32_TENSOR_OP_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
  CHECK(gemm_math_mode(DType::bf16, true) ==
        (CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
  Backends b;
  const std::int64_t m = 256, k = 1024, n = 192;
  Twin a = random_twin(*b.host, *b.dev, {m, k}, DType::f32, 15);
  Twin bb = random_twin(*b.host, *b.dev, {k, n}, DType::f32, 16);
  Tensor ha = b.host->from_f64(b.host->to_f64(a.host), {m, k}, DType::f64, MemCategory::other);
  Tensor hb = b.host->from_f64(b.host->to_f64(bb.host), {k, n}, DType::f64, MemCategory::other);
  Tensor ref = b.host->zeros({m, n}, DType::f64, MemCategory::other);
  b.host->gemm(false, false, 1.0, ha, hb, 0.0, ref);
  Tensor c = b.dev->zeros({m, n}, DType::f32, MemCategory::other);
  MDTP_CUDA_CHECK(cublasSetMathMode(b.dev->cublas(), CUBLAS_TF32_TENSOR_OP_MATH));
  b.dev->gemm(false, false, 1.0, a.dev, bb.dev, 0.0, c);
  CHECK(rel_inf(b.dev->to_f64(c), b.host->to_f64(ref)) <= 1e-5);
  CudaBackendOptions tf32;
  tf32.allow_tf32 = true;
  auto fast = make_cuda_backend(tf32);
  Tensor fa = fast->from_f64(b.host->to_f64(a.host), {m, k}, DType::f32, MemCategory::other);
  Tensor fb = fast->from_f64(b.host->to_f64(bb.host), {k, n}, DType::f32, MemCategory::other);
  Tensor fc = fast->zeros({m, n}, DType::f32, MemCategory::other);
  fast->gemm(false, false, 1.0, fa, fb, 0.0, fc);
  CHECK(rel_inf(fast->to_f64(fc), b.host->to_f64(ref)) <= 1e-2);  // TF32 or not: within TF32's error
}

TEST_CASE("CUDA backend: elementwise, bias and reductions", "[gpu][backend]") {
  Backends b;
  for (DType dt : {DType::f64, DType::f32}) {
    const Shape shape{23, 41};
    Twin x = random_twin(*b.host, *b.dev, shape, dt, 30);
    Twin y = random_twin(*b.host, *b.dev, shape, dt, 31);
    b.host->axpy(-0.37, x.host, y.host);
    b.dev->axpy(-0.37, x.dev, y.dev);
    check_same(b, y, dt, "axpy");
    b.host->scale(y.host, 1.7);
    b.dev->scale(y.dev, 1.7);
    check_same(b, y, dt, "scale");
    Twin row = random_twin(*b.host, *b.dev, {41}, dt, 32);
    b.host->add_row_vector(y.host, row.host);
    b.dev->add_row_vector(y.dev, row.dev);
    check_same(b, y, dt, "add_row_vector");
    for (double beta : {0.0, 1.0, 0.5}) {
      Twin sums = random_twin(*b.host, *b.dev, {41}, dt, 33);
      b.host->column_sums(x.host, sums.host, beta);
      b.dev->column_sums(x.dev, sums.dev, beta);
      check_same(b, sums, dt, "column_sums");
    }
    // A tall matrix exercises the row lanes of the column reduction.
    Twin tall = random_twin(*b.host, *b.dev, {1000, 7}, dt, 34);
    Twin tall_sums = random_twin(*b.host, *b.dev, {7}, dt, 35);
    b.host->column_sums(tall.host, tall_sums.host, 0.0);
    b.dev->column_sums(tall.dev, tall_sums.dev, 0.0);
    check_same(b, tall_sums, dt, "column_sums (tall)");
    const double ss_host = b.host->sum_squares(tall.host), ss_dev = b.dev->sum_squares(tall.dev);
    CHECK(std::abs(ss_dev - ss_host) <= 1e-12 * ss_host);  // both accumulate in f64
    Twin gy = random_twin(*b.host, *b.dev, shape, dt, 36);
    b.host->gelu_forward(x.host, gy.host);
    b.dev->gelu_forward(x.dev, gy.dev);
    check_same(b, gy, dt, "gelu_forward");
    Twin dy = random_twin(*b.host, *b.dev, shape, dt, 37);
    Twin dx = random_twin(*b.host, *b.dev, shape, dt, 38);
    b.host->gelu_backward(x.host, dy.host, dx.host);
    b.dev->gelu_backward(x.dev, dy.dev, dx.dev);
    check_same(b, dx, dt, "gelu_backward");
  }
}

TEST_CASE("CUDA backend: LayerNorm pieces", "[gpu][backend][layernorm]") {
  Backends b;
  const std::int64_t rows = 19, part_cols = 13;
  const int parts = 3;
  const std::int64_t cols = parts * part_cols;
  for (DType dt : {DType::f64, DType::f32}) {
    Twin x = twin(*b.host, *b.dev, random_values(rows * cols, 40, 2.0, 5.0), {rows, cols}, dt);  // mean far from 0
    // Per-part statistics stacked part-major, then merged: must equal the full row's.
    Twin stacked = random_twin(*b.host, *b.dev, {parts * rows, 2}, DType::f64, 41);
    for (int p = 0; p < parts; ++p) {
      Twin part = random_twin(*b.host, *b.dev, {rows, part_cols}, dt, 42);
      Twin stats = random_twin(*b.host, *b.dev, {rows, 2}, DType::f64, 43);
      b.host->copy_block(x.host, 0, p * part_cols, part.host, 0, 0, rows, part_cols);
      b.dev->copy_block(x.dev, 0, p * part_cols, part.dev, 0, 0, rows, part_cols);
      b.host->row_mean_m2(part.host, stats.host);
      b.dev->row_mean_m2(part.dev, stats.dev);
      check_same(b, stats, DType::f64, "row_mean_m2");
      b.host->copy_block(stats.host, 0, 0, stacked.host, p * rows, 0, rows, 2);
      b.dev->copy_block(stats.dev, 0, 0, stacked.dev, p * rows, 0, rows, 2);
    }
    Twin mr = random_twin(*b.host, *b.dev, {rows, 2}, DType::f64, 44);
    b.host->merge_row_stats(stacked.host, parts, part_cols, 1e-5, mr.host);
    b.dev->merge_row_stats(stacked.dev, parts, part_cols, 1e-5, mr.dev);
    check_same(b, mr, DType::f64, "merge_row_stats");

    Twin gamma = random_twin(*b.host, *b.dev, {cols}, dt, 45);
    Twin beta = random_twin(*b.host, *b.dev, {cols}, dt, 46);
    Twin xhat = random_twin(*b.host, *b.dev, {rows, cols}, dt, 47);
    Twin y = random_twin(*b.host, *b.dev, {rows, cols}, dt, 48);
    b.host->layernorm_apply(x.host, mr.host, gamma.host, beta.host, xhat.host, y.host);
    b.dev->layernorm_apply(x.dev, mr.dev, gamma.dev, beta.dev, xhat.dev, y.dev);
    check_same(b, xhat, dt, "layernorm_apply xhat");
    check_same(b, y, dt, "layernorm_apply y");

    Twin dy = random_twin(*b.host, *b.dev, {rows, cols}, dt, 49);
    Twin sums = random_twin(*b.host, *b.dev, {rows, 2}, DType::f64, 50);
    b.host->layernorm_backward_sums(dy.host, xhat.host, gamma.host, sums.host);
    b.dev->layernorm_backward_sums(dy.dev, xhat.dev, gamma.dev, sums.dev);
    check_same(b, sums, DType::f64, "layernorm_backward_sums");
    Twin dx = random_twin(*b.host, *b.dev, {rows, cols}, dt, 51);
    Twin dgamma = random_twin(*b.host, *b.dev, {cols}, dt, 52);
    Twin dbeta = random_twin(*b.host, *b.dev, {cols}, dt, 53);
    b.host->layernorm_backward(dy.host, xhat.host, gamma.host, mr.host, sums.host, cols, dx.host, dgamma.host, dbeta.host);
    b.dev->layernorm_backward(dy.dev, xhat.dev, gamma.dev, mr.dev, sums.dev, cols, dx.dev, dgamma.dev, dbeta.dev);
    check_same(b, dx, dt, "layernorm_backward dx");
    check_same(b, dgamma, dt, "layernorm_backward dgamma");
    check_same(b, dbeta, dt, "layernorm_backward dbeta");
  }
}

TEST_CASE("CUDA backend: 16-bit storage computes in fp32", "[gpu][backend]") {
  Backends b;
  for (DType dt : {DType::bf16, DType::f16}) {
    INFO(dtype_name(dt));
    auto v = random_values(31 * 17, 60);
    Tensor x = b.dev->from_f64(v, {31, 17}, dt, MemCategory::other);
    auto rounded = b.dev->to_f64(x);
    CHECK(rel_inf(rounded, v) <= (dt == DType::bf16 ? 4e-3 : 5e-4));
    Tensor y = b.dev->empty({31, 17}, dt, MemCategory::other);
    b.dev->gelu_forward(x, y);
    Tensor hx = b.host->from_f64(rounded, {31, 17}, DType::f64, MemCategory::other);
    Tensor hy = b.host->empty({31, 17}, DType::f64, MemCategory::other);
    b.host->gelu_forward(hx, hy);
    CHECK(rel_inf(b.dev->to_f64(y), b.host->to_f64(hy)) <= 1e-2);
    Tensor wide = b.dev->empty({31, 17}, DType::f32, MemCategory::other);
    b.dev->convert(x, wide);
    CHECK(b.dev->to_f64(wide) == rounded);  // widening is exact
    CHECK(std::abs(b.dev->sum_squares(x) - b.host->sum_squares(hx)) <= 1e-12 * b.host->sum_squares(hx));
  }
}

// The mixed forms (16-bit data, f32 accumulators) against the host backend, which computes them the
// same way (f32 arithmetic on the stored values): gradients kept in f32 under bf16/f16 training.
TEST_CASE("CUDA backend: 16-bit data into f32 accumulators, as the host backend", "[gpu][backend][lowp]") {
  Backends b;
  const std::int64_t m = 37, k = 29, n = 45;
  for (DType dt : {DType::bf16, DType::f16}) {
    INFO(dtype_name(dt));
    Twin a = random_twin(*b.host, *b.dev, {k, m}, dt, 71), g = random_twin(*b.host, *b.dev, {k, n}, dt, 72);
    Twin c = random_twin(*b.host, *b.dev, {m, n}, DType::f32, 73);
    b.host->gemm(true, false, 1.0, a.host, g.host, 1.0, c.host);  // dW += Xᵀ dY, into f32
    b.dev->gemm(true, false, 1.0, a.dev, g.dev, 1.0, c.dev);
    check_same(b, c, DType::f32, "gemm into f32");
    Twin bias = random_twin(*b.host, *b.dev, {n}, DType::f32, 74);
    b.host->column_sums(g.host, bias.host, 1.0);
    b.dev->column_sums(g.dev, bias.dev, 1.0);
    check_same(b, bias, DType::f32, "column_sums into f32");
    Twin y = random_twin(*b.host, *b.dev, {k, n}, DType::f32, 75);
    b.host->axpy(0.5, g.host, y.host);
    b.dev->axpy(0.5, g.dev, y.dev);
    check_same(b, y, DType::f32, "axpy into f32");
    // LayerNorm backward with dγ, dβ in f32.
    const std::int64_t rows = 9, cols = 40;
    Twin x = random_twin(*b.host, *b.dev, {rows, cols}, dt, 76), gamma = random_twin(*b.host, *b.dev, {cols}, dt, 77);
    Twin beta = random_twin(*b.host, *b.dev, {cols}, dt, 78), dy = random_twin(*b.host, *b.dev, {rows, cols}, dt, 79);
    Twin dgamma = random_twin(*b.host, *b.dev, {cols}, DType::f32, 80), dbeta = random_twin(*b.host, *b.dev, {cols}, DType::f32, 81);
    for (auto [be, xs, gs, bs, dys, dg, db] :
         {std::tuple{static_cast<const Backend*>(b.host.get()), &x.host, &gamma.host, &beta.host, &dy.host, &dgamma.host, &dbeta.host},
          std::tuple{static_cast<const Backend*>(b.dev.get()), &x.dev, &gamma.dev, &beta.dev, &dy.dev, &dgamma.dev, &dbeta.dev}}) {
      Tensor stats = be->empty({rows, 2}, DType::f64, MemCategory::other), mr = be->empty({rows, 2}, DType::f64, MemCategory::other);
      be->row_mean_m2(*xs, stats);
      be->merge_row_stats(stats, 1, cols, 1e-5, mr);
      Tensor xhat = be->empty({rows, cols}, dt, MemCategory::other), out = be->empty({rows, cols}, dt, MemCategory::other);
      be->layernorm_apply(*xs, mr, *gs, *bs, xhat, out);
      Tensor sums = be->empty({rows, 2}, DType::f64, MemCategory::other), dx = be->empty({rows, cols}, dt, MemCategory::other);
      be->layernorm_backward_sums(*dys, xhat, *gs, sums);
      be->layernorm_backward(*dys, xhat, *gs, mr, sums, cols, dx, *dg, *db);
    }
    // xhat is rounded to 16 bits on each device; an element rounded the other way at a tie moves
    // dγ by a unit roundoff of that term: the 16-bit tolerance.
    check_same(b, dgamma, dt, "LayerNorm dgamma into f32");
    check_same(b, dbeta, DType::f32, "LayerNorm dbeta into f32");
  }
}

TEST_CASE("CUDA backend: refuses host tensors and mixed dtypes", "[gpu][backend]") {
  Backends b;
  Tensor host = b.host->zeros({4, 4}, DType::f32, MemCategory::other);
  Tensor dev = b.dev->zeros({4, 4}, DType::f32, MemCategory::other);
  Tensor dev64 = b.dev->zeros({4, 4}, DType::f64, MemCategory::other);
  CHECK_THROWS_WITH(b.dev->fill(host, 1.0), Catch::Contains("lives on host"));
  CHECK_THROWS_WITH(b.dev->axpy(1.0, host, dev), Catch::Contains("backend needs cuda tensors"));
  CHECK_THROWS_WITH(b.dev->axpy(1.0, dev64, dev), Catch::Contains("mixed dtypes f64 and f32"));
  CHECK_THROWS_WITH(b.host->fill(dev, 1.0), Catch::Contains("lives on cuda"));
}
