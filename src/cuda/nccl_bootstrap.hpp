#pragma once
// An NCCL communicator over the ranks of an MPI communicator, bootstrapped the standard way:
// ncclGetUniqueId on rank 0, MPI_Bcast of the id, ncclCommInitRank on every rank (NCCL rank =
// MPI rank).  Collective over `comm`.
#include <mpi.h>
#include <nccl.h>

#include <string>

namespace mdtp {

// On `device` (made current).  Rank 0 broadcasts ncclGetUniqueId's status with the id, so a
// failure there fails every rank with the same message (naming `what`) instead of leaving them
// in MPI_Bcast.
ncclComm_t nccl_init_rank_over(MPI_Comm comm, int device, const std::string& what);

}  // namespace mdtp
