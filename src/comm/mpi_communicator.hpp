#pragma once
// The MPI implementation of Communicator.  Every operation is started with its MPI_I* call and
// waited for under a WaitPolicy (comm/wait_policy.hpp: why oversubscribed ranks must wait
// politely, and how MDTP_WAIT selects the policy).
//
// It carries host tensors of every dtype (bf16 and f16 as 2-byte types with f32-arithmetic
// reductions: mpi_half_types.hpp); a device tensor is refused with an mdtp::Error before any MPI
// call.  Zero-element buffers are valid.
#include <mpi.h>

#include <memory>
#include <string>

#include "comm/communicator.hpp"
#include "comm/wait_policy.hpp"

namespace mdtp {

// Takes ownership of `comm` (freed with MPI_Comm_free unless it is MPI_COMM_WORLD/SELF, or MPI
// is already finalized).  `comm` must not be MPI_COMM_NULL: a rank outside a group has no
// communicator for it.  Not collective.
std::unique_ptr<Communicator> make_mpi_communicator(std::string name, MPI_Comm comm,
                                                    CommLedger* ledger, WaitPolicy policy);

}  // namespace mdtp
