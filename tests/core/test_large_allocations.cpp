// The large-allocation policy (core/large_allocations.hpp): who decides the malloc thresholds, and
// that with mdtp's fixed thresholds a large block freed and asked for again costs no new page
// faults — what makes MPI's per-call reduction temporaries cheap past 32 MiB.
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <cstdlib>
#include <cstring>

#include "core/backend.hpp"
#include "core/error.hpp"
#include "core/host_info.hpp"
#include "core/large_allocations.hpp"

using namespace mdtp;

namespace {

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Minor page faults of allocating, touching and freeing `bytes`.
long faults_of_one_use(std::size_t bytes) {
  const long before = minor_faults();
  auto* p = static_cast<char*>(std::malloc(bytes));
  REQUIRE(p != nullptr);
  std::memset(p, 1, bytes);
  std::free(p);
  return minor_faults() - before;
}

}  // namespace

TEST_CASE("the environment or MDTP_HOST_MALLOC decides the malloc thresholds, else mdtp fixes them",
          "[core][large-allocations]") {
  using C = LargeAllocationChoice;
  CHECK(choose_large_allocation_policy(nullptr, nullptr, nullptr, nullptr) == C::fix_thresholds);
  CHECK(choose_large_allocation_policy("reuse", nullptr, nullptr, nullptr) == C::fix_thresholds);
  CHECK(choose_large_allocation_policy("", "", "", "") == C::fix_thresholds);
  CHECK(choose_large_allocation_policy("glibc", nullptr, nullptr, nullptr) == C::glibc_default);
  CHECK(choose_large_allocation_policy(nullptr, "65536", nullptr, nullptr) == C::environment);
  CHECK(choose_large_allocation_policy(nullptr, nullptr, "131072", nullptr) == C::environment);
  CHECK(choose_large_allocation_policy(nullptr, nullptr, nullptr, "glibc.malloc.mmap_threshold=1048576") ==
        C::environment);
  CHECK(choose_large_allocation_policy(nullptr, nullptr, nullptr, "glibc.cpu.hwcaps=-AVX512F") == C::fix_thresholds);
  CHECK_THROWS_WITH(choose_large_allocation_policy("always", nullptr, nullptr, nullptr),
                    Catch::Contains("MDTP_HOST_MALLOC must be reuse or glibc; got 'always'"));
}

TEST_CASE("with the thresholds fixed a freed 48 MiB block is reused without page faults",
          "[core][large-allocations]") {
  make_host_backend();  // applies the policy, as every mdtp run does
  const LargeAllocationPolicy& policy = large_allocation_policy();
  CHECK(host_info().malloc == policy.description);
  CHECK_FALSE(policy.description.empty());
  if (!policy.fixed_by_mdtp) {
    WARN("malloc thresholds not set by mdtp here (" << policy.description << "): nothing to measure");
    return;
  }
  const std::size_t bytes = 48u << 20;  // past glibc's largest dynamic mmap threshold (32 MiB)
  faults_of_one_use(bytes);             // the heap grows once
  const long again = faults_of_one_use(bytes);
  INFO("minor page faults of a second 48 MiB use: " << again << " (12288 pages if faulted in afresh)");
  CHECK(again < 256);
}
