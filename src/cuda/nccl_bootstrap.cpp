#include "cuda/nccl_bootstrap.hpp"

#include "comm/wait_policy.hpp"
#include "core/error.hpp"
#include "cuda/cuda_check.hpp"

namespace mdtp {

ncclComm_t nccl_init_rank_over(MPI_Comm comm, int device, const std::string& what) {
  int rank = 0, size = 0;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  struct {
    int ok;
    ncclUniqueId id;
  } message{};
  if (rank == 0) message.ok = ncclGetUniqueId(&message.id) == ncclSuccess;
  check_mpi(MPI_Bcast(&message, sizeof message, MPI_BYTE, 0, comm), "MPI_Bcast(ncclUniqueId)");
  require(message.ok, what, ": ncclGetUniqueId failed on rank 0 of its MPI communicator; run with NCCL_DEBUG=INFO ",
          "for the reason");
  MDTP_CUDA_CHECK(cudaSetDevice(device));
  ncclComm_t made = nullptr;
  MDTP_CUDA_CHECK(ncclCommInitRank(&made, size, message.id, rank));
  return made;
}

}  // namespace mdtp
