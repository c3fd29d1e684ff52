#pragma once
// The BLAS library the host GEMM calls, as found at run time: which one it is (name, version and,
// for OpenBLAS, the kernel set it chose for this CPU), how many threads it uses, and whether its
// kernels can run here at all.
//
// Threads: mdtp runs one MPI rank per core, so a BLAS that spreads one GEMM over every core makes
// the ranks fight over them.  The first call sets the library's thread count to MDTP_BLAS_THREADS
// (default 1) through its own API (OpenBLAS, MKL or BLIS, found as weak symbols, so any CBLAS
// links); a library without one is left alone and says so in `note`.
//
// Kernel set: OpenBLAS picks its kernels from cpuid at load time, or from OPENBLAS_CORETYPE.
// A core the CPU cannot execute (OPENBLAS_CORETYPE=SkylakeX on an AVX2 machine) dies with an
// illegal instruction at the first GEMM; mdtp checks the chosen core against the CPU first and
// falls back to Eigen's GEMM instead (`usable` false, `note` says why).  A CPU that OpenBLAS
// under-detects (AVX-512 present, Haswell/Zen kernels chosen) runs correctly but slower: recorded
// in `note`, never overridden.
#include <string>
#include <string_view>

#include "core/cpu_features.hpp"

namespace mdtp {

struct BlasLibrary {
  bool linked = false;  // mdtp was built with a CBLAS (MDTP_BLAS=ON and one was found)
  bool usable = false;  // linked, and its kernels can run on this CPU
  std::string vendor;   // "openblas", "mkl", "blis", "cblas" (unidentified), "" when not linked
  std::string name;     // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64"
  std::string path;     // the file that provides cblas_sgemm in this process; "" when not told
  std::string core;     // OpenBLAS' kernel set ("Zen", "Haswell", "SkylakeX"); "" when not told
  int threads = 0;      // threads one call may use (after mdtp set them); 0 when unknown
  std::string note;     // a fallback or a mis-detection, in one sentence; "" when none
};

// Sets the thread count on the first call (an mdtp::Error for a malformed MDTP_BLAS_THREADS) and
// describes the library; cheap after that.
const BlasLibrary& blas_library();

// The CPU flags that OpenBLAS kernel set `core` needs and `cpu` lacks, space-separated ("" when it
// runs there, or when `core` is not one mdtp knows).
std::string openblas_core_missing_flags(std::string_view core, const CpuFeatures& cpu);

// The thread count MDTP_BLAS_THREADS asks for: `value` (nullptr: unset → 1).
int blas_threads_from_env(const char* value);

}  // namespace mdtp
