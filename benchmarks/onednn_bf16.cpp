// mdtp_bench_onednn: the host bf16 GEMM against oneDNN's bf16 matmul, the library PyTorch uses for
// bf16 on CPUs, on the same bf16 values in one process and one thread: the measurement behind the
// host backend's choice of bf16 GEMM (docs/host-performance.md, "Which bf16 GEMM").  Per size,
// square, NN (Y = X·W):
//   mdtp     Backend::gemm on bf16 tensors (the BLAS's sgemm on widened tiles, bf16 C)
//   oneDNN   dnnl::matmul, bf16 x bf16 -> bf16, and -> f32 (the weight gradient's form)
//   sgemm    cblas_sgemm on f32 copies of the same values (what mdtp multiplies with)
// Prints oneDNN's version, the ISA it dispatches to and the implementation it picked; where
// oneDNN makes no bf16 matmul on the CPU (it needs an AVX512 core) its columns are 0 and it says
// so.  Run with OMP_NUM_THREADS=1 (Debian's oneDNN uses OpenMP); mdtp sets its BLAS to one thread.
//
//   mdtp_bench_onednn [--min-size 512] [--max-size 2048] [--samples 5]
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "core/cblas.hpp"

using namespace mdtp;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Best of `samples` timings of `iters` calls each: the least disturbed sample on a shared machine.
template <class F>
double best_seconds(int samples, int iters, F call) {
  double best = 1e30;
  call();  // warm-up
  for (int s = 0; s < samples; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) call();
    best = std::min(best, seconds_since(t0) / iters);
  }
  return best;
}

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

// oneDNN's n x n bf16 matmul into a `dst_type` result, or nothing where this CPU has none.
std::optional<dnnl::matmul::primitive_desc> bf16_matmul(const dnnl::engine& engine, std::int64_t n,
                                                         dnnl::memory::data_type dst_type) {
  using tag = dnnl::memory::format_tag;
  const dnnl::memory::desc in_md({n, n}, dnnl::memory::data_type::bf16, tag::ab), out_md({n, n}, dst_type, tag::ab);
  try {
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(in_md, in_md, out_md), engine);
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

}  // namespace

int main(int argc, char** argv) try {
  std::int64_t min_size = 512, max_size = 2048;
  int samples = 5;
  require(argc % 2 == 1, "mdtp_bench_onednn: every option takes a value");
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i];
    if (arg == "--min-size") min_size = std::atoll(argv[i + 1]);
    else if (arg == "--max-size") max_size = std::atoll(argv[i + 1]);
    else if (arg == "--samples") samples = std::max(1, std::atoi(argv[i + 1]));
    else throw_error("mdtp_bench_onednn: unknown option '", arg, "'; expected --min-size, --max-size or --samples");
  }
  require(min_size >= 1 && min_size <= max_size, "mdtp_bench_onednn: need 1 <= --min-size <= --max-size");
  auto backend = make_host_backend();
  const dnnl_version_t* version = dnnl_version();
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const char* omp = std::getenv("OMP_NUM_THREADS");
  std::printf("# oneDNN %d.%d.%d, effective ISA %s; mdtp backend %s; OMP_NUM_THREADS=%s\n", version->major,
              version->minor, version->patch, isa_name(dnnl::get_effective_cpu_isa()), backend->name(),
              omp ? omp : "unset");
  if (!bf16_matmul(engine, min_size, dnnl::memory::data_type::bf16))
    std::printf("# oneDNN makes no bf16 matmul on this CPU (it needs an AVX512 core): its columns are 0\n");
  std::printf("%6s %12s %14s %18s %12s %16s %16s\n", "n", "mdtp GF/s", "oneDNN GF/s", "oneDNN>f32 GF/s",
              "sgemm GF/s", "oneDNN / mdtp", "oneDNN / sgemm");
  std::mt19937_64 gen(7);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (std::int64_t n = min_size; n <= max_size; n *= 2) {
    std::vector<double> values(static_cast<std::size_t>(n * n));
    for (double& x : values) x = dist(gen);
    const Tensor a = backend->from_f64(values, {n, n}, DType::bf16, MemCategory::other);
    const Tensor b = backend->from_f64(values, {n, n}, DType::bf16, MemCategory::other);
    Tensor c = backend->zeros({n, n}, DType::bf16, MemCategory::other);
    Tensor c32 = backend->zeros({n, n}, DType::f32, MemCategory::other);
    const double flops = 2.0 * static_cast<double>(n) * n * n;
    const int iters = static_cast<int>(std::max(1.0, 1e9 / flops));  // ~10 ms per sample
    const double t_mdtp = best_seconds(samples, iters, [&] { backend->gemm(false, false, 1.0, a, b, 0.0, c); });
    // oneDNN on the very bf16 buffers mdtp multiplies; 0 where it has no bf16 matmul here.
    auto time_onednn = [&](dnnl::memory::data_type dst_type, Tensor& result) {
      const auto pd = bf16_matmul(engine, n, dst_type);
      if (!pd) return 0.0;
      if (n == min_size && dst_type == dnnl::memory::data_type::bf16)
        std::printf("# oneDNN implementation: %s\n", pd->impl_info_str());
      const dnnl::matmul matmul(*pd);
      dnnl::memory am(pd->src_desc(), engine, const_cast<void*>(a.raw_data()));
      dnnl::memory bm(pd->weights_desc(), engine, const_cast<void*>(b.raw_data()));
      dnnl::memory cm(pd->dst_desc(), engine, result.raw_data());
      return best_seconds(samples, iters, [&] {
        matmul.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
        stream.wait();
      });
    };
    const double t_onednn = time_onednn(dnnl::memory::data_type::bf16, c);
    const double t_onednn32 = time_onednn(dnnl::memory::data_type::f32, c32);
    double t_sgemm = 0.0;
#ifdef MDTP_HAVE_CBLAS
    Tensor a32 = backend->empty({n, n}, DType::f32, MemCategory::other);
    Tensor b32 = backend->empty({n, n}, DType::f32, MemCategory::other);
    backend->convert(a, a32);
    backend->convert(b, b32);
    const int ni = static_cast<int>(n);
    t_sgemm = best_seconds(samples, iters, [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0f, a32.data<float>(), ni,
                  b32.data<float>(), ni, 0.0f, c32.data<float>(), ni);
    });
#endif
    auto rate = [&](double t) { return t > 0 ? 1e-9 * flops / t : 0.0; };
    std::printf("%6lld %12.1f %14.1f %18.1f %12.1f %15.2fx %15.2fx\n", static_cast<long long>(n), rate(t_mdtp),
                rate(t_onednn), rate(t_onednn32), rate(t_sgemm), t_onednn > 0 ? t_mdtp / t_onednn : 0.0,
                t_onednn > 0 && t_sgemm > 0 ? t_sgemm / t_onednn : 0.0);
    std::fflush(stdout);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "mdtp_bench_onednn: error: %s\n", e.what());
  return 1;
}
