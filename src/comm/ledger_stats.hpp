#pragma once
// The ledger across ranks: per (phase, group, op), the mean and the maximum over the ranks of
// `comm` of each rank's totals (docs/theory.md §5: report the maximum as well as the mean).  A key
// that some ranks never recorded counts as zero on them, so the mean is over all ranks of `comm`
// (a pipeline stage's groups that other stages lack are averaged down, visibly so in `ranks`).
// Groups are matched by name: "tp.row" on every rank is the axis, whichever members it has.
#include <mpi.h>

#include <vector>

#include "comm/ledger.hpp"
#include "comm/wait_policy.hpp"

namespace mdtp {

struct MeanMax {
  double mean = 0.0;
  double max = 0.0;
};

struct LedgerStat {
  LedgerKey key;
  int group_size = 0;  // the largest group size recorded under the key
  int ranks = 0;       // ranks of `comm` that recorded the key at least once
  MeanMax calls, logical_bytes, bus_bytes, seconds;
  // The wait for the last peer (skew) beside the transfer in `seconds`, and how many of the calls
  // were timed that way (comm/ledger.hpp: sync timing); both 0 without sync timing.
  MeanMax wait_seconds, synchronised_calls;
};

// Collective over `comm`: every rank must call it, and every rank gets the same table, ordered
// by key.  It talks to MPI directly, so it records nothing in any ledger.
std::vector<LedgerStat> reduce_ledger_stats(const CommLedger& ledger, MPI_Comm comm,
                                            WaitPolicy policy = WaitPolicy::polite);

}  // namespace mdtp
