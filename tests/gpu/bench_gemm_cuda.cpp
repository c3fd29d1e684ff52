// GEMM throughput through CudaBackend::gemm against the same cuBLAS call made directly, at the
// same shapes on the same stream: the ratio is the cost of the backend's layer (validation,
// dispatch), which should be ~1.00 at any shape worth benchmarking.
//
//   bench_gemm_cuda [--iters N] [--dtype f32|tf32|f64|bf16|f16|all] [--shape MxNxK]...
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/cuda_backend.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_gemm.hpp"
#include "gpu/event_timer.hpp"
#include "gpu/gpu_presence.hpp"

using namespace mdtp;
using mdtp::gpu_test::time_per_call;

namespace {

struct GemmShape {
  std::int64_t m, n, k;
};

struct Variant {
  const char* name;
  DType dtype;
  bool tf32;
};

// The raw cuBLAS call for row-major C[m,n] = A[m,k] B[k,n] (as column-major Cᵀ = Bᵀ Aᵀ).
void raw_gemm(cublasHandle_t h, const Variant& v, const GemmShape& s, const void* a, const void* b, void* c) {
  const int m = static_cast<int>(s.m), n = static_cast<int>(s.n), k = static_cast<int>(s.k);
  if (v.dtype == DType::f64) {
    const double one = 1.0, zero = 0.0;
    MDTP_CUDA_CHECK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, static_cast<const double*>(b), n,
                                static_cast<const double*>(a), k, &zero, static_cast<double*>(c), n));
    return;
  }
  const float one = 1.0f, zero = 0.0f;
  if (v.dtype == DType::f32 && !v.tf32) {
    MDTP_CUDA_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, static_cast<const float*>(b), n,
                                static_cast<const float*>(a), k, &zero, static_cast<float*>(c), n));
    return;
  }
  const cudaDataType_t t = v.dtype == DType::f32 ? CUDA_R_32F : v.dtype == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
  const cublasComputeType_t compute = v.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  MDTP_CUDA_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, t, n, a, t, k, &zero, c, t, n, compute,
                               CUBLAS_GEMM_DEFAULT));
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "bench_gemm_cuda: %s\nusage: bench_gemm_cuda [--iters N] [--dtype f32|tf32|f64|bf16|f16|all] "
                       "[--shape MxNxK]...\n", why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 20;
  std::string which = "all";
  std::vector<GemmShape> shapes;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + arg).c_str());
    if (arg == "--iters") iters = std::atoi(argv[++i]);
    else if (arg == "--dtype") which = argv[++i];
    else if (arg == "--shape") {
      GemmShape s{};
      if (std::sscanf(argv[++i], "%ldx%ldx%ld", &s.m, &s.n, &s.k) != 3 || s.m <= 0 || s.n <= 0 || s.k <= 0)
        usage("--shape expects MxNxK with positive extents");
      shapes.push_back(s);
    } else usage(("unknown argument " + arg).c_str());
  }
  if (iters < 1) usage("--iters must be at least 1");
  if (shapes.empty())  // square ones, and GPT-2 small's MLP/attention GEMMs at 8192 tokens
    shapes = {{1024, 1024, 1024}, {4096, 4096, 4096}, {8192, 3072, 768}, {8192, 768, 3072}, {8192, 2304, 768}};

  mdtp::gpu_test::exit_unless_gpu("bench_gemm_cuda");
  const Variant all[] = {{"f32", DType::f32, false}, {"tf32", DType::f32, true}, {"f64", DType::f64, false},
                         {"bf16", DType::bf16, false}, {"f16", DType::f16, false}};
  cudaDeviceProp props{};
  MDTP_CUDA_CHECK(cudaGetDeviceProperties(&props, 0));
  std::printf("device: %s, %d iterations per point\n", props.name, iters);
  std::printf("%-5s %6s %6s %6s %14s %14s %7s\n", "dtype", "m", "n", "k", "backend TF/s", "cuBLAS TF/s", "ratio");
  bool any = false;
  for (const Variant& v : all) {
    if (which != "all" && which != v.name) continue;
    any = true;
    CudaBackendOptions options;
    options.allow_tf32 = v.tf32;
    auto backend = make_cuda_backend(options);
    cublasHandle_t raw = nullptr;
    MDTP_CUDA_CHECK(cublasCreate(&raw));
    MDTP_CUDA_CHECK(cublasSetStream(raw, backend->stream()));
    MDTP_CUDA_CHECK(cublasSetMathMode(raw, gemm_math_mode(v.dtype, v.tf32)));  // the backend's numerics
    for (const GemmShape& s : shapes) {
      Tensor a = backend->empty({s.m, s.k}, v.dtype, MemCategory::activations);
      Tensor b = backend->empty({s.k, s.n}, v.dtype, MemCategory::activations);
      Tensor c = backend->empty({s.m, s.n}, v.dtype, MemCategory::activations);
      backend->fill(a, 0.01);
      backend->fill(b, 0.02);
      const double flop = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
      const double t_backend = time_per_call(backend->stream(), iters, [&] { backend->gemm(false, false, 1.0, a, b, 0.0, c); });
      const double t_raw = time_per_call(backend->stream(), iters, [&] { raw_gemm(raw, v, s, a.raw_data(), b.raw_data(), c.raw_data()); });
      std::printf("%-5s %6ld %6ld %6ld %14.2f %14.2f %7.3f\n", v.name, s.m, s.n, s.k, flop / t_backend * 1e-12,
                  flop / t_raw * 1e-12, t_raw / t_backend);
    }
    cublasDestroy(raw);
  }
  if (!any) usage(("unknown --dtype " + which).c_str());
  return 0;
}
