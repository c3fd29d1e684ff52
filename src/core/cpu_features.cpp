#include "core/cpu_features.hpp"

#include <algorithm>
#include <cstdint>
#include <fstream>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define MDTP_X86 1
#endif

namespace mdtp {
namespace {

std::string trim(std::string s) {
  const auto first = s.find_first_not_of(" \t");
  const auto last = s.find_last_not_of(" \t\n");
  return first == std::string::npos ? std::string() : s.substr(first, last - first + 1);
}

// "model name : ..." from /proc/cpuinfo (every architecture Linux runs on names its CPU there).
std::string proc_cpuinfo_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0 || line.rfind("Model", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return trim(line.substr(colon + 1));
    }
  }
  return "";
}

#ifdef MDTP_X86
struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(unsigned leaf, unsigned subleaf = 0) {
  Regs r;
  if (!__get_cpuid_count(leaf, subleaf, &r.a, &r.b, &r.c, &r.d)) return Regs{};
  return r;
}

std::uint64_t xcr0() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

std::string brand_string() {
  if (cpuid(0x80000000).a < 0x80000004) return "";
  char brand[49] = {};
  for (unsigned i = 0; i < 3; ++i) {
    const Regs r = cpuid(0x80000002 + i);
    const unsigned words[4] = {r.a, r.b, r.c, r.d};
    for (unsigned w = 0; w < 4; ++w)
      for (unsigned byte = 0; byte < 4; ++byte) brand[i * 16 + w * 4 + byte] = static_cast<char>(words[w] >> (8 * byte));
  }
  return trim(brand);
}

std::vector<std::string> x86_flags() {
  std::vector<std::string> flags;
  const auto bit = [](unsigned reg, int n) { return (reg >> n) & 1u; };
  const Regs l1 = cpuid(1), l7 = cpuid(7, 0), l7s1 = cpuid(7, 1);
  const bool osxsave = bit(l1.c, 27);
  const std::uint64_t xcr = osxsave ? xcr0() : 0;
  const bool os_avx = (xcr & 0x6) == 0x6;             // SSE and AVX state
  const bool os_avx512 = os_avx && (xcr & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  const bool os_amx = (xcr & 0x60000) == 0x60000;     // XTILECFG, XTILEDATA
  const auto add = [&](bool present, const char* name) {
    if (present) flags.emplace_back(name);
  };
  add(bit(l1.d, 26), "sse2");
  add(bit(l1.c, 20), "sse4_2");
  add(os_avx && bit(l1.c, 28), "avx");
  add(os_avx && bit(l7.b, 5), "avx2");
  add(os_avx && bit(l1.c, 12), "fma");
  add(os_avx512 && bit(l7.b, 16), "avx512f");
  add(os_avx512 && bit(l7.b, 17), "avx512dq");
  add(os_avx512 && bit(l7.b, 30), "avx512bw");
  add(os_avx512 && bit(l7.b, 31), "avx512vl");
  add(os_avx512 && bit(l7.c, 11), "avx512_vnni");
  add(os_avx512 && bit(l7s1.a, 5), "avx512_bf16");
  add(os_avx512 && bit(l7.d, 23), "avx512_fp16");
  add(os_amx && bit(l7.d, 24), "amx_tile");
  add(os_amx && bit(l7.d, 22), "amx_bf16");
  add(os_amx && bit(l7.d, 25), "amx_int8");
  return flags;
}
#endif

CpuFeatures detect() {
  CpuFeatures f;
  f.model = proc_cpuinfo_model();
#ifdef MDTP_X86
  if (f.model.empty()) f.model = brand_string();
  f.flags = x86_flags();
#endif
  if (f.model.empty()) f.model = "unknown";
  return f;
}

}  // namespace

bool CpuFeatures::has(std::string_view flag) const {
  return std::find(flags.begin(), flags.end(), flag) != flags.end();
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

std::vector<std::string> compiled_flags() {
  std::vector<std::string> flags;
#ifdef __SSE2__
  flags.emplace_back("sse2");
#endif
#ifdef __SSE4_2__
  flags.emplace_back("sse4_2");
#endif
#ifdef __AVX__
  flags.emplace_back("avx");
#endif
#ifdef __AVX2__
  flags.emplace_back("avx2");
#endif
#ifdef __FMA__
  flags.emplace_back("fma");
#endif
#ifdef __AVX512F__
  flags.emplace_back("avx512f");
#endif
#ifdef __AVX512DQ__
  flags.emplace_back("avx512dq");
#endif
#ifdef __AVX512BW__
  flags.emplace_back("avx512bw");
#endif
#ifdef __AVX512VL__
  flags.emplace_back("avx512vl");
#endif
  return flags;
}

std::vector<std::string> missing_compiled_flags(const CpuFeatures& cpu) {
  std::vector<std::string> missing;
#ifdef MDTP_X86
  for (const std::string& flag : compiled_flags())
    if (!cpu.has(flag)) missing.push_back(flag);
#endif
  return missing;
}

std::string join_flags(const std::vector<std::string>& flags) {
  std::string out;
  for (const std::string& f : flags) {
    if (!out.empty()) out += ' ';
    out += f;
  }
  return out;
}

}  // namespace mdtp
