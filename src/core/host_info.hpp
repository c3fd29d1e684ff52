#pragma once
// Provenance of the host compute, for every run's results: the CPU and its vector extensions,
// what this build was compiled to use, the GEMM (which BLAS, version, kernel set, threads, or
// Eigen), the vector math library and how malloc serves large blocks.  Measured times mean
// little without these.
#include <string>
#include <utility>
#include <vector>

namespace mdtp {

struct HostInfo {
  std::string cpu_model;       // "AMD EPYC 7763 64-Core Processor"
  std::string cpu_extensions;  // the vector ones the CPU and OS support: "sse2 sse4_2 avx avx2 fma"
  std::string compiled_for;    // the ones this build uses unconditionally: "sse2 … avx2 fma"
  std::string gemm;            // "blas" or "eigen": the engine host GEMMs run on
  std::string blas_library;    // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64"; "none"
  std::string blas_core;       // OpenBLAS' kernel set ("Zen"); "" when not told
  int blas_threads = 0;        // threads per BLAS call (per rank); 0 when unknown or no BLAS
  std::string blas_note;       // a fallback or mis-detection, one sentence; "" when none
  std::string vector_math;     // "SLEEF 3.5.1 _u10, AVX (4 f64 / 8 f32 per call)"
  std::string malloc;          // how large allocations are served (large_allocations.hpp)

  // (key, value) pairs with keys prefixed "host_", ready for a results file's attributes
  // (blas_threads as decimal text).
  std::vector<std::pair<std::string, std::string>> attributes() const;
  // One line per field, "key: value".
  std::string to_string() const;
};

// Sets the BLAS thread count if nothing has yet (see core/blas_library.hpp), and the large
// allocation policy (core/large_allocations.hpp).
HostInfo host_info();

}  // namespace mdtp
