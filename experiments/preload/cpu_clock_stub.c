// Preloaded by `mdtp simulate` into SimGrid's process (experiments/cli/simulate.cpp): the CPU-time
// clocks read as zero; every other clock is the C library's.
//
// Why: SMPI benchmarks the host code between two MPI calls of a simulated rank by reading
// CLOCK_THREAD_CPUTIME_ID when the rank leaves MPI and again when it re-enters (SimGrid 3.32,
// smpi_bench_begin/smpi_bench_end), to charge that host time to the simulated clock.  mdtp runs
// with smpi/simulate-computation:no — its kernels charge their modelled time themselves — so the
// reading only feeds a statistic nobody prints, yet a CPU-time clock is a system call, not a
// vDSO read: about a fifth of the wall time of a 256-rank simulation here.  Nothing mdtp reports
// reads a CPU-time clock (its timers are MPI_Wtime, the simulated clock), and the simulated times
// are identical with and without this file (docs/simulate.md).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <time.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec*);

int clock_gettime(clockid_t clock, struct timespec* now) {
  if (clock == CLOCK_THREAD_CPUTIME_ID || clock == CLOCK_PROCESS_CPUTIME_ID) {
    now->tv_sec = 0;
    now->tv_nsec = 0;
    return 0;
  }
  // Resolved on first use; a race between threads stores the same pointer twice.
  static clock_gettime_fn next = NULL;
  if (next == NULL) next = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
  return next(clock, now);
}
