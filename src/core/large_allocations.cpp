#include "core/large_allocations.hpp"

#include <cstdlib>
#include <string_view>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "core/error.hpp"

namespace mdtp {
namespace {

constexpr int kThresholdBytes = 1 << 30;  // 1 GiB: far above any per-call temporary of a collective here

bool set(const char* value) { return value != nullptr && *value != '\0'; }

LargeAllocationPolicy apply() {
  const LargeAllocationChoice choice =
      choose_large_allocation_policy(std::getenv("MDTP_HOST_MALLOC"), std::getenv("MALLOC_MMAP_THRESHOLD_"),
                                     std::getenv("MALLOC_TRIM_THRESHOLD_"), std::getenv("GLIBC_TUNABLES"));
  LargeAllocationPolicy policy;
  switch (choice) {
    case LargeAllocationChoice::environment:
      policy.description = "glibc malloc thresholds from the environment";
      return policy;
    case LargeAllocationChoice::glibc_default:
      policy.description = "glibc malloc's dynamic thresholds (MDTP_HOST_MALLOC=glibc)";
      return policy;
    case LargeAllocationChoice::fix_thresholds: break;
  }
#if defined(__GLIBC__)
  // mallopt answers 1 when it took the value (a sanitizer's malloc may not).
  policy.fixed_by_mdtp =
      mallopt(M_MMAP_THRESHOLD, kThresholdBytes) == 1 && mallopt(M_TRIM_THRESHOLD, kThresholdBytes) == 1;
  policy.description = policy.fixed_by_mdtp ? "glibc malloc mmap and trim thresholds fixed at 1 GiB by mdtp"
                                            : "glibc malloc thresholds: mallopt refused by this malloc";
#else
  policy.description = "not glibc: the C library's own malloc";
#endif
  return policy;
}

}  // namespace

LargeAllocationChoice choose_large_allocation_policy(const char* mdtp_host_malloc, const char* mmap_threshold,
                                                     const char* trim_threshold, const char* glibc_tunables) {
  const std::string_view mode = set(mdtp_host_malloc) ? mdtp_host_malloc : "reuse";
  require(mode == "reuse" || mode == "glibc", "MDTP_HOST_MALLOC must be reuse or glibc; got '", mode, "'");
  if (mode == "glibc") return LargeAllocationChoice::glibc_default;
  const bool tunables =
      set(glibc_tunables) && std::string_view(glibc_tunables).find("glibc.malloc.") != std::string_view::npos;
  if (set(mmap_threshold) || set(trim_threshold) || tunables) return LargeAllocationChoice::environment;
  return LargeAllocationChoice::fix_thresholds;
}

const LargeAllocationPolicy& large_allocation_policy() {
  static const LargeAllocationPolicy policy = apply();
  return policy;
}

}  // namespace mdtp
