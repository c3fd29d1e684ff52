#pragma once
// Device tensors over MPI, through host buffers: each operation copies its device inputs to host
// staging tensors, runs the MPI communicator (make_mpi_communicator) on them and copies the
// results back.  It is how several ranks share one GPU (NCCL refuses that: one GPU per rank), so
// that the GPU path can be tested on a workstation or a CI machine with a single GPU.  It is not
// fast: every operation waits for the compute stream, and copies through pageable memory.
//
// Staging tensors are accounted as MemCategory::communication by `host_staging` (pass the host
// backend's allocator to see them next to the rest of the host memory).  bf16/f16 travel as their
// 2 bytes, reduced in f32 by the MPI communicator's operations (comm/mpi_half_types.hpp).
// The ledger records the full staged time on the host clock.
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/wait_policy.hpp"
#include "cuda/cuda_backend.hpp"

namespace mdtp {

class StagedMpiCommunicator final : public Communicator {
 public:
  // Takes ownership of `group_comm` (handed to the MPI communicator).  Not collective.
  // `backend` must outlive the communicator.
  StagedMpiCommunicator(std::string name, MPI_Comm group_comm, CommLedger* ledger,
                        const CudaBackend& backend, WaitPolicy policy,
                        std::shared_ptr<Allocator> host_staging = nullptr);
  ~StagedMpiCommunicator() override;

  const char* backend_name() const override { return "mpi-staged"; }
  std::vector<int> world_ranks() const override { return inner_->world_ranks(); }
  Allocator& host_staging() const { return *host_; }

 protected:
  std::unique_ptr<PendingOp> start_all_reduce(Tensor& buffer, ReduceOp op) override;
  std::unique_ptr<PendingOp> start_all_gather(const Tensor& shard, Tensor& gathered) override;
  std::unique_ptr<PendingOp> start_reduce_scatter(const Tensor& full, Tensor& shard, ReduceOp op) override;
  std::unique_ptr<PendingOp> start_broadcast(Tensor& buffer, int root) override;
  std::unique_ptr<PendingOp> start_reduce(const Tensor& in, Tensor& out, int root, ReduceOp op) override;
  std::unique_ptr<PendingOp> start_send(const Tensor& buffer, int peer, int tag) override;
  std::unique_ptr<PendingOp> start_recv(Tensor& buffer, int peer, int tag) override;
  std::unique_ptr<PendingOp> start_barrier() override;
  // Called by the base class for every buffer before anything starts: a device tensor of the
  // backend's GPU whose element count the inner MPI call can carry.  So a refused call starts
  // nothing (a sendrecv whose send buffer is refused leaves no MPI receive posted), and neither
  // the copies nor the inner MPI communicator refuse anything afterwards.
  void require_supported(const Tensor& t, const char* what, const char* op) const override;

 private:
  class Pending;
  Tensor download(const Tensor& device) const;   // host copy
  Tensor host_like(const Tensor& device) const;  // uninitialised host buffer
  void upload(const Tensor& host, Tensor& device) const;

  const CudaBackend* backend_;
  std::shared_ptr<Allocator> host_;
  // The inner MPI communicator records into this disabled ledger: only this communicator's own
  // public calls reach the caller's ledger, so nothing is counted twice.
  std::unique_ptr<CommLedger> silent_ledger_;
  std::unique_ptr<Communicator> inner_;
};

std::unique_ptr<Communicator> make_staged_mpi_communicator(std::string name, MPI_Comm group_comm,
                                                           CommLedger* ledger, const CudaBackend& backend,
                                                           WaitPolicy policy,
                                                           std::shared_ptr<Allocator> host_staging = nullptr);

}  // namespace mdtp
