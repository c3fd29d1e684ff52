#pragma once
// How a rank waits for an MPI operation, and the measurement that picks it.
//
// Why a wait policy: with more ranks than cores (8-64 ranks on a 2-core machine), a blocking
// MPI call spins and starves the ranks it waits for (a 4 KiB all-reduce on 8 ranks: ~48 ms).
// The "polite" policy starts the non-blocking MPI_I* call and loops MPI_Test + sched_yield()
// (~0.23 ms).  "library" uses MPI_Wait, best when each rank has its own core.
// MDTP_WAIT=polite|library|auto selects it; auto (default, also when unset or empty) is polite
// exactly when the node runs more ranks than its ranks have cores.  The policy and the
// oversubscription factor are recorded in every results file.
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "comm/collective_watchdog.hpp"

namespace mdtp {

enum class WaitPolicy : std::uint8_t { polite, library };
const char* wait_policy_name(WaitPolicy policy);

struct NodeOccupancy {
  int local_ranks = 1;  // ranks of `world` on this node
  // Cores the node's ranks may run on: the union of their affinity masks, so that ranks pinned
  // one per core count as one rank per core rather than as many ranks on one core.
  int cores = 1;
  double oversubscription() const { return static_cast<double>(local_ranks) / cores; }
  // The cores one rank may keep busy with threads of its own: its share of the node's (at least 1).
  int cores_per_rank() const { return std::max(1, cores / std::max(1, local_ranks)); }
};

// Collective over `world` (call it on every rank of `world`).  Ranks reporting the same
// MPI_Get_processor_name share a node.
NodeOccupancy measure_node_occupancy(MPI_Comm world);
// Reads MDTP_WAIT; an unknown value is an mdtp::Error naming it.
WaitPolicy resolve_wait_policy(const NodeOccupancy& occupancy);
// The same decision for an explicit setting (`setting` as MDTP_WAIT would hold it).
WaitPolicy parse_wait_policy(std::string_view setting, const NodeOccupancy& occupancy);

// Waits for `request` under `policy`; fills `status` (may be MPI_STATUS_IGNORE).  The wait has
// the process's deadline (comm/collective_watchdog.hpp); `label` is what it is named by when
// the deadline passes.
void wait_mpi_request(MPI_Request& request, MPI_Status* status, WaitPolicy policy, const WaitLabel& label);
// Throws mdtp::Error naming the MPI call and the library's message unless rc == MPI_SUCCESS
// (reachable when a communicator's error handler is MPI_ERRORS_RETURN).
void check_mpi(int rc, const char* call);

}  // namespace mdtp
