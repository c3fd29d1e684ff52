#include "core/blas_library.hpp"

#include <dlfcn.h>

#include <array>
#include <cstdlib>
#include <cstring>

#include "core/error.hpp"

// The thread and identity APIs of the BLAS libraries mdtp knows, declared weak: whichever library
// was linked defines its own, the others stay null.  (This file must not include a cblas.h, which
// declares some of them strongly.)
extern "C" {
void openblas_set_num_threads(int) __attribute__((weak));
int openblas_get_num_threads() __attribute__((weak));
char* openblas_get_config() __attribute__((weak));
char* openblas_get_corename() __attribute__((weak));
void MKL_Set_Num_Threads(int) __attribute__((weak));
int MKL_Get_Max_Threads() __attribute__((weak));
void MKL_Get_Version_String(char*, int) __attribute__((weak));
void bli_thread_set_num_threads(long) __attribute__((weak));
long bli_thread_get_num_threads() __attribute__((weak));
const char* bli_info_get_version_str() __attribute__((weak));
// Declared only for its address (which file provides it); never called from here.
void cblas_sgemm() __attribute__((weak));
}

namespace mdtp {
namespace {

struct CoreNeeds {
  const char* core;
  std::array<const char*, 5> flags;
};

// OpenBLAS' DYNAMIC_ARCH kernel sets (driver/others/dynamic.c corename[]) and the instructions
// their kernels use.  Older and non-vector sets need nothing beyond x86-64.
constexpr CoreNeeds kCoreNeeds[] = {
    {"SapphireRapids", {"avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_bf16"}},
    {"Cooperlake", {"avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_bf16"}},
    {"SkylakeX", {"avx512f", "avx512dq", "avx512bw", "avx512vl", nullptr}},
    {"Haswell", {"avx2", "fma", nullptr, nullptr, nullptr}},
    {"Zen", {"avx2", "fma", nullptr, nullptr, nullptr}},
    {"Sandybridge", {"avx", nullptr, nullptr, nullptr, nullptr}},
    {"Bulldozer", {"avx", nullptr, nullptr, nullptr, nullptr}},
    {"Piledriver", {"avx", "fma", nullptr, nullptr, nullptr}},
    {"Steamroller", {"avx", "fma", nullptr, nullptr, nullptr}},
    {"Excavator", {"avx2", "fma", nullptr, nullptr, nullptr}},
};

bool linked_with_cblas() {
#ifdef MDTP_HAVE_CBLAS
  return true;
#else
  return false;
#endif
}

void identify(BlasLibrary& lib) {
  if (openblas_get_config) {
    lib.vendor = "openblas";
    lib.name = openblas_get_config();
    if (openblas_get_corename) lib.core = openblas_get_corename();
  } else if (MKL_Get_Version_String) {
    lib.vendor = "mkl";
    char version[256] = {};
    MKL_Get_Version_String(version, sizeof version);
    lib.name = version;
  } else if (bli_info_get_version_str) {
    lib.vendor = "blis";
    lib.name = std::string("BLIS ") + bli_info_get_version_str();
  } else {
    lib.vendor = "cblas";
    lib.name = "CBLAS (unidentified library)";
  }
}

// Sets `threads` through the library's API; returns what it reports afterwards (0: unknown).
int set_threads(int threads) {
  if (openblas_set_num_threads) {
    openblas_set_num_threads(threads);
    return openblas_get_num_threads ? openblas_get_num_threads() : threads;
  }
  if (MKL_Set_Num_Threads) {
    MKL_Set_Num_Threads(threads);
    return MKL_Get_Max_Threads ? MKL_Get_Max_Threads() : threads;
  }
  if (bli_thread_set_num_threads) {
    bli_thread_set_num_threads(threads);
    return bli_thread_get_num_threads ? static_cast<int>(bli_thread_get_num_threads()) : threads;
  }
  return 0;
}

BlasLibrary detect() {
  BlasLibrary lib;
  lib.linked = linked_with_cblas();
  if (!lib.linked) return lib;
  identify(lib);
  if (Dl_info info{}; cblas_sgemm != nullptr && dladdr(reinterpret_cast<void*>(&cblas_sgemm), &info) != 0 &&
                      info.dli_fname != nullptr)
    lib.path = info.dli_fname;
  const int wanted = blas_threads_from_env(std::getenv("MDTP_BLAS_THREADS"));
  lib.threads = set_threads(wanted);
  if (lib.threads == 0)
    lib.note = "this BLAS offers no thread API mdtp knows; set its own variable (e.g. OMP_NUM_THREADS) to " +
               std::to_string(wanted) + " per rank";
  lib.usable = true;
  const CpuFeatures& cpu = cpu_features();
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  const std::string forced_text = forced ? std::string(" (OPENBLAS_CORETYPE=") + forced + ")" : "";
  if (const std::string missing = openblas_core_missing_flags(lib.core, cpu); !missing.empty()) {
    lib.usable = false;
    lib.note = "OpenBLAS kernel set " + lib.core + forced_text + " needs " + missing +
               ", which this CPU lacks; GEMM falls back to Eigen";
  } else if (cpu.has("avx512f") && (lib.core == "Haswell" || lib.core == "Zen" || lib.core == "Sandybridge")) {
    lib.note = "this CPU has AVX-512 but OpenBLAS runs its " + lib.core + " kernels" + forced_text +
               " (CPU not recognised by this OpenBLAS; a newer one may be faster)";
  }
  return lib;
}

}  // namespace

int blas_threads_from_env(const char* value) {
  if (value == nullptr || *value == '\0') return 1;
  char* end = nullptr;
  const long n = std::strtol(value, &end, 10);
  require(end != value && *end == '\0' && n >= 1 && n <= 4096, "MDTP_BLAS_THREADS must be a positive integer; got '",
          value, "'");
  return static_cast<int>(n);
}

std::string openblas_core_missing_flags(std::string_view core, const CpuFeatures& cpu) {
  std::string missing;
  for (const CoreNeeds& needs : kCoreNeeds) {
    if (core != needs.core) continue;
    for (const char* flag : needs.flags)
      if (flag != nullptr && !cpu.has(flag)) {
        if (!missing.empty()) missing += ' ';
        missing += flag;
      }
  }
  return missing;
}

const BlasLibrary& blas_library() {
  static const BlasLibrary lib = detect();
  return lib;
}

}  // namespace mdtp
