#pragma once
// What the CPU this process runs on can execute: its model name and the vector extensions that
// matter for the host kernels and the BLAS (AVX2, FMA, AVX-512 and AMX), read from cpuid (and the
// OS's XCR0, so an extension the kernel does not enable is not reported).  Also which of them this
// build was compiled to use, so a binary built with -march=native on a newer machine can refuse
// to run instead of dying on an illegal instruction.
#include <string>
#include <string_view>
#include <vector>

namespace mdtp {

struct CpuFeatures {
  std::string model;               // "AMD EPYC 7763 64-Core Processor"; "unknown" when not told
  std::vector<std::string> flags;  // /proc/cpuinfo spellings: "avx2", "fma", "avx512f", "amx_tile", …
  bool has(std::string_view flag) const;
};

// Read once per process.
const CpuFeatures& cpu_features();

// The extensions this build's compiler flags let it use without checking ("avx2 fma" for
// -march=native on an AVX2 machine; "sse2" for a portable x86-64 build).
std::vector<std::string> compiled_flags();

// The flags of `compiled_flags()` that `cpu` lacks (empty: this build runs on it).
std::vector<std::string> missing_compiled_flags(const CpuFeatures& cpu);

// "avx2 fma" (space-separated, in the given order).
std::string join_flags(const std::vector<std::string>& flags);

}  // namespace mdtp
