#pragma once
// Output files are written by one rank; the others must learn whether that worked, or a failed
// write on rank 0 would leave them waiting in the next collective.  run_on_root runs `task` on
// rank 0 of `comm`, broadcasts success or the error message, and throws the same mdtp::Error on
// every rank when it failed.  (Raw MPI on purpose: this is control, not model traffic, and stays
// out of the ledger.)
#include <mpi.h>

#include <functional>

namespace mdtp::run {

void run_on_root(MPI_Comm comm, const std::function<void()>& task);

}  // namespace mdtp::run
