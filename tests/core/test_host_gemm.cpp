// The host GEMM: the BLAS engine against Eigen's (the fallback and reference) and a float64 loop,
// on awkward sizes (0, 1, odd, past a blocking size), every transpose, sub-block leading
// dimensions and beta = 0 over NaN; the BLAS library's run-time checks (threads, kernel set).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

#include "core/backend.hpp"
#include "core/blas_library.hpp"
#include "core/host_gemm.hpp"
#include "core/host_info.hpp"
#include "test_values.hpp"

using namespace mdtp;
using mdtp::testing::random_values;
using mdtp::testing::rel_inf;

namespace {

struct Case {
  std::int64_t m, n, k;
};

// C (m x n, leading dimension ldc) after host_gemm on operands with padded leading dimensions,
// as float64; `c0` is C's initial m x ldc content.
template <class T>
std::vector<double> run_gemm(GemmEngine engine, bool ta, bool tb, const Case& s, double alpha, double beta,
                             const std::vector<double>& av, std::int64_t lda, const std::vector<double>& bv,
                             std::int64_t ldb, const std::vector<double>& c0, std::int64_t ldc) {
  std::vector<T> a(av.begin(), av.end()), b(bv.begin(), bv.end()), c(c0.begin(), c0.end());
  host_gemm<T>(ta, tb, s.m, s.n, s.k, static_cast<T>(alpha), a.data(), lda, b.data(), ldb, static_cast<T>(beta),
               c.data(), ldc, engine);
  return {c.begin(), c.end()};
}

}  // namespace

TEST_CASE("the BLAS and Eigen GEMM engines agree with a float64 loop on awkward sizes", "[core][gemm][blas]") {
  if (!gemm_engine_available(GemmEngine::blas))
    WARN("no usable BLAS in this build (" << blas_library().note << "): only the Eigen engine is checked");
  const Case cases[] = {{0, 0, 0}, {0, 3, 2}, {3, 0, 2}, {3, 2, 0}, {1, 1, 1},    {1, 7, 5},
                        {7, 1, 5}, {5, 7, 1}, {13, 17, 19}, {64, 65, 63}, {127, 33, 129}};
  const std::pair<double, double> scalars[] = {{1.0, 0.0}, {0.5, 2.0}, {-1.0, 1.0}, {0.0, 0.5}};
  unsigned seed = 1;
  for (const Case& s : cases)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (auto [alpha, beta] : scalars) {
          // Operands are sub-blocks of wider rows (leading dimension = width + 3), as attention's are.
          const std::int64_t a_rows = ta ? s.k : s.m, a_cols = ta ? s.m : s.k;
          const std::int64_t b_rows = tb ? s.n : s.k, b_cols = tb ? s.k : s.n;
          const std::int64_t lda = a_cols + 3, ldb = b_cols + 3, ldc = s.n + 3;
          const auto av = random_values(static_cast<std::size_t>(a_rows * lda), seed++);
          const auto bv = random_values(static_cast<std::size_t>(b_rows * ldb), seed++);
          auto c0 = random_values(static_cast<std::size_t>(s.m * ldc), seed++);
          // beta = 0 must not read C: NaN there must not leak into the result.
          if (beta == 0.0 && !c0.empty()) c0[0] = std::numeric_limits<double>::quiet_NaN();
          std::vector<double> ref = c0;
          for (std::int64_t i = 0; i < s.m; ++i)
            for (std::int64_t j = 0; j < s.n; ++j) {
              double acc = 0.0;
              for (std::int64_t p = 0; p < s.k; ++p)
                acc += (ta ? av[p * lda + i] : av[i * lda + p]) * (tb ? bv[j * ldb + p] : bv[p * ldb + j]);
              ref[i * ldc + j] = alpha * acc + (beta == 0.0 ? 0.0 : beta * c0[i * ldc + j]);
            }
          INFO("m=" << s.m << " n=" << s.n << " k=" << s.k << " ta=" << ta << " tb=" << tb << " alpha=" << alpha
                    << " beta=" << beta);
          for (GemmEngine engine : {GemmEngine::eigen, GemmEngine::blas}) {
            if (!gemm_engine_available(engine)) continue;
            INFO("engine " << gemm_engine_name(engine));
            const auto got64 = run_gemm<double>(engine, ta, tb, s, alpha, beta, av, lda, bv, ldb, c0, ldc);
            CHECK(rel_inf(got64, ref) <= 1e-13);
            const auto got32 = run_gemm<float>(engine, ta, tb, s, alpha, beta, av, lda, bv, ldb, c0, ldc);
            CHECK(rel_inf(got32, ref) <= 1e-5);
            // Columns past n of each row of C (the padding) are left alone.
            for (std::int64_t i = 0; i < s.m; ++i)
              for (std::int64_t j = s.n; j < ldc; ++j)
                CHECK(std::memcmp(&got64[i * ldc + j], &c0[i * ldc + j], sizeof(double)) == 0);
          }
          if (gemm_engine_available(GemmEngine::blas)) {
            const auto blas = run_gemm<double>(GemmEngine::blas, ta, tb, s, alpha, beta, av, lda, bv, ldb, c0, ldc);
            const auto eigen = run_gemm<double>(GemmEngine::eigen, ta, tb, s, alpha, beta, av, lda, bv, ldb, c0, ldc);
            CHECK(rel_inf(blas, eigen) <= 1e-13);
          }
        }
}

TEST_CASE("the host backend names the GEMM it runs and computes through it", "[core][gemm][blas]") {
  auto be = make_host_backend();
  const BlasLibrary& lib = blas_library();
  const std::string expected = default_gemm_engine() == GemmEngine::blas ? "host-" + lib.vendor : "host-eigen";
  CHECK(std::string(be->name()) == expected);
  CHECK(gemm_engine_available(default_gemm_engine()));
  CHECK((default_gemm_engine() == GemmEngine::blas) == lib.usable);
  // Large enough for the BLAS' blocked path; f32 and f64 against the Eigen engine.
  const std::int64_t m = 300, k = 257, n = 190;
  for (DType dt : {DType::f64, DType::f32}) {
    const auto av = random_values(m * k, 3), bv = random_values(k * n, 4);
    Tensor a = be->from_f64(av, {m, k}, dt, MemCategory::other);
    Tensor b = be->from_f64(bv, {k, n}, dt, MemCategory::other);
    Tensor c = be->zeros({m, n}, dt, MemCategory::other);
    be->gemm(false, false, 1.0, a, b, 0.0, c);
    std::vector<double> ref(static_cast<std::size_t>(m * n), 0.0);
    host_gemm<double>(false, false, m, n, k, 1.0, av.data(), k, bv.data(), n, 0.0, ref.data(), n, GemmEngine::eigen);
    CHECK(rel_inf(be->to_f64(c), ref) <= (dt == DType::f64 ? 1e-13 : 1e-5));
  }
}

TEST_CASE("MDTP_BLAS_THREADS: one BLAS thread per rank unless told otherwise", "[core][blas]") {
  CHECK(blas_threads_from_env(nullptr) == 1);
  CHECK(blas_threads_from_env("") == 1);
  CHECK(blas_threads_from_env("4") == 4);
  for (const char* bad : {"0", "-2", "two", "3x", "1.5"})
    CHECK_THROWS_WITH(blas_threads_from_env(bad), Catch::Contains("MDTP_BLAS_THREADS must be a positive integer"));
  const BlasLibrary& lib = blas_library();
  if (lib.linked && lib.vendor != "cblas" && std::getenv("MDTP_BLAS_THREADS") == nullptr) CHECK(lib.threads == 1);
}

TEST_CASE("OpenBLAS kernel sets are checked against the CPU's extensions", "[core][blas]") {
  const CpuFeatures avx2{"test CPU", {"sse2", "avx", "avx2", "fma"}};
  const CpuFeatures old{"test CPU", {"sse2"}};
  const CpuFeatures avx512{"test CPU", {"sse2", "avx", "avx2", "fma", "avx512f", "avx512dq", "avx512bw", "avx512vl"}};
  CHECK(openblas_core_missing_flags("SkylakeX", avx2) == "avx512f avx512dq avx512bw avx512vl");
  CHECK(openblas_core_missing_flags("SkylakeX", avx512).empty());
  CHECK(openblas_core_missing_flags("Cooperlake", avx512) == "avx512_bf16");
  CHECK(openblas_core_missing_flags("Haswell", avx2).empty());
  CHECK(openblas_core_missing_flags("Zen", old) == "avx2 fma");
  CHECK(openblas_core_missing_flags("Nehalem", old).empty());
  CHECK(openblas_core_missing_flags("SomeFutureCore", old).empty());
}

// Also run by ctest with OPENBLAS_CORETYPE=SkylakeX (core_blas_coretype_np1): on a CPU without
// AVX-512 that kernel set would die with an illegal instruction; mdtp must fall back to Eigen.
TEST_CASE("a BLAS kernel set the CPU cannot run falls back to Eigen", "[core][blas][blas-coretype]") {
  const BlasLibrary& lib = blas_library();
  if (!lib.linked) {
    WARN("built without a BLAS: nothing to check");
    return;
  }
  const std::string missing = openblas_core_missing_flags(lib.core, cpu_features());
  INFO("BLAS " << lib.name << ", core '" << lib.core << "', note: " << lib.note);
  CHECK(lib.usable == missing.empty());
  if (!missing.empty()) {
    CHECK(default_gemm_engine() == GemmEngine::eigen);
    CHECK_THAT(lib.note, Catch::Contains("falls back to Eigen") && Catch::Contains(missing));
  }
  auto be = make_host_backend();
  Tensor a = be->from_f64({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f32, MemCategory::other);
  Tensor c = be->zeros({2, 2}, DType::f32, MemCategory::other);
  be->gemm(false, true, 1.0, a, a, 0.0, c);
  CHECK(be->to_f64(c) == std::vector<double>{14, 32, 32, 77});
}

TEST_CASE("host provenance names the CPU, its extensions, the GEMM and the vector math", "[core][host-info]") {
  const HostInfo info = host_info();
  CHECK(!info.cpu_model.empty());
  CHECK((info.gemm == "blas" || info.gemm == "eigen"));
  CHECK(!info.vector_math.empty());
#if defined(__x86_64__)
  CHECK_THAT(info.cpu_extensions, Catch::Contains("sse2"));
  CHECK_THAT(info.compiled_for, Catch::Contains("sse2"));
  CHECK(missing_compiled_flags(cpu_features()).empty());
#endif
  if (blas_library().linked) CHECK(info.blas_library == blas_library().name);
  else CHECK(info.blas_library == "none");
  for (const auto& [key, value] : info.attributes()) CHECK(key.rfind("host_", 0) == 0);
  CHECK_THAT(info.to_string(), Catch::Contains("host_cpu_model: " + info.cpu_model));
}
