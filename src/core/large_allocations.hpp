#pragma once
// How this process's C library serves large allocations, set once per process (docs/
// performance-model.md §12, "Large temporaries and the C library").
//
// glibc's malloc serves a request at or above its mmap threshold with fresh pages from mmap and
// unmaps them on free; the threshold adapts upwards to the largest block freed, but never past
// 32 MiB on a 64-bit system.  MPI libraries allocate temporaries per call in their reductions, so
// once those exceed 32 MiB every call pays the page faults of fresh memory again — a cost of the
// host's allocator, not of the link, which no α-β model of the link can follow.  Measured on 2 ranks
// of one host (MPICH 4.0.2, sync-timed, the slower rank's median of 10 calls): MPI_Reduce of
// 24 MiB 25.9 ms, 8.9 ms with the thresholds fixed; all-reduce of 32 MiB 19.1 against 9.6 ms;
// reduce-scatter of 64 MiB 37.0 against 14.6 ms.
//
// So unless told otherwise, mdtp fixes glibc's mmap and trim thresholds at 1 GiB, the first time
// a host backend is made (or host_info() asked): below that size freed memory is reused from the
// heap instead of being returned and faulted in again.  The environment decides instead when it
// sets MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_ or glibc.malloc tunables (GLIBC_TUNABLES),
// or MDTP_HOST_MALLOC=glibc (leave glibc's dynamic thresholds); MDTP_HOST_MALLOC=reuse is the
// default, any other value an mdtp::Error naming it.
#include <string>

namespace mdtp {

struct LargeAllocationPolicy {
  bool fixed_by_mdtp = false;  // the thresholds were set here
  std::string description;     // for provenance (host_malloc), one phrase
};

// Applies the policy the first time it is called in a process and returns it every time.
const LargeAllocationPolicy& large_allocation_policy();

// The decision alone, from the environment's values (nullptr: unset) — no side effect.
enum class LargeAllocationChoice { fix_thresholds, environment, glibc_default };
LargeAllocationChoice choose_large_allocation_policy(const char* mdtp_host_malloc, const char* mmap_threshold,
                                                     const char* trim_threshold, const char* glibc_tunables);

}  // namespace mdtp
