// mdtp_bench_host: GEMM through mdtp's host backend against a direct cblas_?gemm call on the same
// operands, f32 and f64 (and bf16/f16, whose GEMM is the BLAS's sgemm on widened tiles: against
// cblas_sgemm on f32 copies of the same values, once with a 16-bit C and once with an f32 C, the
// weight gradient's form), square sizes 256…4096, in the three forms the layers use:
//   NN  Y = X·W           (Linear forward)
//   NT  dX = dY·Wᵀ        (Linear backward, input gradient)
//   TN  dW = Xᵀ·dY        (Linear backward, weight gradient)
// Each cell alternates the two calls and keeps the best of several timed samples of each (the
// machine may be shared; the best sample is the least disturbed one).  Prints the host's
// provenance first.  run_host_bench.py runs this and the training comparison.
//
//   mdtp_bench_host [--max-size 4096] [--min-size 256] [--dtypes f32,f64,bf16,f16] [--samples 7]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "core/cblas.hpp"
#include "core/host_info.hpp"

using namespace mdtp;

namespace {

struct Options {
  std::int64_t min_size = 256, max_size = 4096;
  int samples = 7;
  std::vector<DType> dtypes{DType::f32, DType::f64};
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    require(value != nullptr, "mdtp_bench_host: ", arg, " needs a value");
    if (arg == "--max-size") o.max_size = std::atoll(value);
    else if (arg == "--min-size") o.min_size = std::atoll(value);
    else if (arg == "--samples") o.samples = std::max(1, std::atoi(value));
    else if (arg == "--dtypes") {
      o.dtypes.clear();
      std::string list = value;
      for (std::size_t start = 0; start <= list.size();) {  // comma-separated dtype names
        const std::size_t end = std::min(list.find(',', start), list.size());
        if (end > start) o.dtypes.push_back(parse_dtype(list.substr(start, end - start)));
        start = end + 1;
      }
    } else throw_error("mdtp_bench_host: unknown option '", arg, "'; expected --max-size --min-size --dtypes --samples");
    ++i;
  }
  require(o.min_size >= 1 && o.min_size <= o.max_size, "mdtp_bench_host: need 1 <= --min-size <= --max-size");
  return o;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

#ifdef MDTP_HAVE_CBLAS
void direct_gemm(bool ta, bool tb, const Tensor& a, const Tensor& b, Tensor& c) {
  const int m = static_cast<int>(c.rows()), n = static_cast<int>(c.cols());
  const int k = static_cast<int>(ta ? a.rows() : a.cols());
  const auto t_a = ta ? CblasTrans : CblasNoTrans, t_b = tb ? CblasTrans : CblasNoTrans;
  const int lda = static_cast<int>(a.cols()), ldb = static_cast<int>(b.cols());
  if (c.dtype() == DType::f32)
    cblas_sgemm(CblasRowMajor, t_a, t_b, m, n, k, 1.0f, a.data<float>(), lda, b.data<float>(), ldb, 0.0f,
                c.data<float>(), n);
  else
    cblas_dgemm(CblasRowMajor, t_a, t_b, m, n, k, 1.0, a.data<double>(), lda, b.data<double>(), ldb, 0.0,
                c.data<double>(), n);
}
#endif

struct Form {
  const char* name;
  bool ta, tb;
};

}  // namespace

int main(int argc, char** argv) try {
  const Options opt = parse(argc, argv);
  auto backend = make_host_backend();
  std::printf("# mdtp_bench_host: backend %s\n", backend->name());
  for (const auto& [key, value] : host_info().attributes()) std::printf("# %s: %s\n", key.c_str(), value.c_str());
#ifndef MDTP_HAVE_CBLAS
  std::printf("# no CBLAS linked (MDTP_BLAS=OFF or none found): the direct column is empty\n");
#endif
  std::printf("%-8s %-4s %6s %14s %16s %8s\n", "dtype", "form", "size", "mdtp GFLOP/s", "direct GFLOP/s", "ratio");
  std::mt19937_64 gen(7);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  const Form forms[] = {{"NN", false, false}, {"NT", false, true}, {"TN", true, false}};
  for (DType dt : opt.dtypes)
    for (const DType ct : is_16bit(dt) ? std::vector<DType>{dt, DType::f32} : std::vector<DType>{dt})
    for (std::int64_t n = opt.min_size; n <= opt.max_size; n *= 2) {
      std::vector<double> values(static_cast<std::size_t>(n * n));
      for (double& v : values) v = dist(gen);
      const Tensor a = backend->from_f64(values, {n, n}, dt, MemCategory::other);
      const Tensor b = backend->from_f64(values, {n, n}, dt, MemCategory::other);
      Tensor c = backend->zeros({n, n}, ct, MemCategory::other);
      // The direct call's operands: the same values in f32 for a 16-bit GEMM (what it multiplies).
      const DType wide = is_16bit(dt) ? DType::f32 : dt;
      Tensor a_direct = backend->empty({n, n}, wide, MemCategory::other), b_direct = backend->empty({n, n}, wide, MemCategory::other);
      backend->convert(a, a_direct);
      backend->convert(b, b_direct);
      Tensor c_direct = backend->zeros({n, n}, wide, MemCategory::other);
      const std::string label = ct == dt ? dtype_name(dt) : std::string(dtype_name(dt)) + ">f32";
      const double flops = 2.0 * static_cast<double>(n) * n * n;
      const int iters = static_cast<int>(std::max(1.0, 1e9 / flops));  // ~10 ms per sample
      const int samples = n >= 4096 ? std::min(opt.samples, 2) : n >= 2048 ? std::min(opt.samples, 3) : opt.samples;
      for (const Form& f : forms) {
        double best_mdtp = 1e30, best_direct = 1e30;
        backend->gemm(f.ta, f.tb, 1.0, a, b, 0.0, c);  // warm-up (and the BLAS' thread setting)
        for (int s = 0; s < samples; ++s) {
          auto t0 = std::chrono::steady_clock::now();
          for (int i = 0; i < iters; ++i) backend->gemm(f.ta, f.tb, 1.0, a, b, 0.0, c);
          best_mdtp = std::min(best_mdtp, seconds_since(t0) / iters);
#ifdef MDTP_HAVE_CBLAS
          t0 = std::chrono::steady_clock::now();
          for (int i = 0; i < iters; ++i) direct_gemm(f.ta, f.tb, a_direct, b_direct, c_direct);
          best_direct = std::min(best_direct, seconds_since(t0) / iters);
#endif
        }
        const double g_mdtp = flops / best_mdtp * 1e-9;
#ifdef MDTP_HAVE_CBLAS
        const double g_direct = flops / best_direct * 1e-9;
        std::printf("%-8s %-4s %6lld %14.1f %16.1f %7.1f%%\n", label.c_str(), f.name, static_cast<long long>(n),
                    g_mdtp, g_direct, 100.0 * g_mdtp / g_direct);
#else
        std::printf("%-8s %-4s %6lld %14.1f %16s %8s\n", label.c_str(), f.name, static_cast<long long>(n), g_mdtp,
                    "-", "-");
#endif
        std::fflush(stdout);
      }
    }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "mdtp_bench_host: error: %s\n", e.what());
  return 1;
}
