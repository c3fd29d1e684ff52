#pragma once
// The small collectives a run needs around its experiment: host names at set-up, statistics and
// ledger keys for the report, barriers around timed sections, a failure message to every rank.
// They are not the experiment's traffic, so they bypass the ledger and the model.
//
// Why one place: on a real MPI they start the non-blocking call and wait under the rank's wait
// policy (comm/wait_policy.hpp: polite on an oversubscribed node).  In the SMPI build
// (docs/simulate.md) SimGrid's non-blocking collectives are the slow path — every completion scans
// the list of requests in flight, so a world-wide MPI_Iallgather over 256 simulated ranks took
// minutes of wall time — while its blocking collectives are point-to-point algorithms that cost
// what their messages cost.  There nothing else is in flight during these calls, so blocking is
// safe, and waits block in MPI_Wait anyway.
#include <mpi.h>

#include "comm/collective_watchdog.hpp"
#include "comm/wait_policy.hpp"

namespace mdtp {

void bookkeeping_barrier(MPI_Comm comm, WaitPolicy policy, const WaitLabel& label);
// In place on `data` (`count` elements of `type`).
void bookkeeping_all_reduce(void* data, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, WaitPolicy policy,
                            const WaitLabel& label);
// `count` elements of `type` from every rank into `all`, in rank order.
void bookkeeping_all_gather(const void* mine, int count, MPI_Datatype type, void* all, MPI_Comm comm,
                            WaitPolicy policy, const WaitLabel& label);
// Rank r's `counts[r]` elements at `offsets[r]` of `all`.
void bookkeeping_all_gatherv(const void* mine, int count, MPI_Datatype type, void* all, const int* counts,
                             const int* offsets, MPI_Comm comm, WaitPolicy policy, const WaitLabel& label);
void bookkeeping_broadcast(void* data, int count, MPI_Datatype type, int root, MPI_Comm comm, WaitPolicy policy,
                           const WaitLabel& label);

}  // namespace mdtp
