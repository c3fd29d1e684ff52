#pragma once
// Mean and maximum over the ranks of a communicator, for the per-rank numbers the drivers report
// (times, peak memory): docs/theory.md §5 asks for the maximum beside the mean, because the slowest
// rank sets the step time.  Talks to MPI directly (never through a Communicator), so nothing here
// lands in a CommLedger, and waits under the mesh's wait policy so that oversubscribed ranks do
// not spin.
#include <mpi.h>

#include <string>
#include <vector>

#include "comm/ledger_stats.hpp"
#include "comm/wait_policy.hpp"

namespace mdtp::run {

// Collective over `comm`: element-wise mean and max of `values` (same length on every rank).
std::vector<MeanMax> mean_max_over_ranks(const std::vector<double>& values, MPI_Comm comm, WaitPolicy policy);
MeanMax mean_max_over_ranks(double value, MPI_Comm comm, WaitPolicy policy);

// Collective over `comm`: true on every rank when `ok` is true on every rank.
bool all_ranks_agree(bool ok, MPI_Comm comm, WaitPolicy policy);

// Collective over `comm`: returns when `failure` is empty on every rank; otherwise throws, on
// every rank, an mdtp::Error with the failure of the lowest rank that has one (work that each
// rank checks on its own part — its shards of a checkpoint — then fails everywhere alike).
void throw_first_failure(const std::string& failure, MPI_Comm comm, WaitPolicy policy);

// Collective over `comm`: rank `root`'s string on every rank.
std::string broadcast_string(const std::string& value, int root, MPI_Comm comm, WaitPolicy policy);

}  // namespace mdtp::run
