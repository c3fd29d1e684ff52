#pragma once
// The NCCL implementation of Communicator, for device tensors (f32, f64, bf16, f16).
//
// Streams: each communicator has its own CUDA stream.  An operation is enqueued there after the
// backend's compute stream has reached the point of the call (an event, no host wait), bracketed
// by two timing events; wait() waits for the end event on the host and device_seconds() is the
// time between the two events, so the ledger records what the collective took on the GPU and not
// the microseconds of its enqueue.
//
// Creation is eager: the constructor creates the NCCL communicator before it returns, so that
// nothing is created mid-run (where a grown caching allocator can leave NCCL no memory, and where
// ranks reaching groups in different orders would deadlock).  Either the constructor bootstraps it
// itself (nccl_bootstrap.hpp: a collective over the group) or it is handed one split from a world
// communicator (nccl_mesh_splits.hpp).  Both are collective, so communicators must be constructed
// in one order on all ranks: a Mesh does, in Topology::group_names() order.
//
// Send/recv: NCCL has no tags and a send may wait for its receive, so point-to-point operations
// are queued and launched together in one ncclGroupStart/End when one of them is waited on or any
// NCCL communicator of the rank (the members of one NcclRankContext) starts a collective:
// sendrecv (irecv + isend + waits) is then a single exchange, and a ring shift cannot deadlock,
// while a send is never held back behind an operation of another group.  (Between an isend and
// its wait, do not block in MPI on the receiving rank's progress: the send is not launched yet.)
// Matching is by order, per peer; tags are ignored.  Every operation of a batch reports the
// batch's device time.  Communicators of one context are used from one thread.
#include <mpi.h>
#include <nccl.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "cuda/cuda_backend.hpp"

namespace mdtp {

class NcclCommunicator;

// The NCCL communicators of one rank, so that any of them can launch the others' queued
// send/recv first (see above).  make_nccl_comm_factory shares one among all it makes.
class NcclRankContext {
 public:
  void flush_point_to_point();  // of every member
  // Keeps what the members were made from (the parent of split communicators) alive as long as
  // any member: the context lives until its last communicator and factory are gone.
  void keep_alive(std::shared_ptr<const void> resource) { resources_.push_back(std::move(resource)); }

 private:
  friend class NcclCommunicator;
  std::vector<NcclCommunicator*> members_;
  std::vector<std::shared_ptr<const void>> resources_;
};

class NcclCommunicator final : public Communicator {
 public:
  // Takes ownership of `group_comm` (freed with MPI_Comm_free unless MPI_COMM_WORLD/SELF or MPI
  // is finalized) and of `nccl` when given: an NCCL communicator already made for exactly this
  // group, NCCL rank = group rank (then the constructor is not collective).  Without `nccl` it
  // bootstraps one: collective over the group.  `backend` must outlive the communicator, and the
  // communicator every handle it returned.  `context` null: a context of its own.
  NcclCommunicator(std::string name, MPI_Comm group_comm, CommLedger* ledger, const CudaBackend& backend,
                   std::shared_ptr<NcclRankContext> context = nullptr, ncclComm_t nccl = nullptr);
  ~NcclCommunicator() override;

  const char* backend_name() const override { return "nccl"; }
  std::vector<int> world_ranks() const override { return world_ranks_; }

  // How the NCCL communicator was made: "split" (from a world communicator) or "init-rank".
  const char* creation() const { return split_ ? "split" : "init-rank"; }
  cudaStream_t stream() const { return stream_; }

  // Launches this communicator's queued send/recv operations (see the header comment).
  void flush_point_to_point();
  NcclRankContext& context() const { return *context_; }

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
  // backend's GPU, of a dtype NCCL carries.  So a refused call starts nothing (a sendrecv whose
  // send buffer is refused leaves no receive queued), and the start_* hooks refuse nothing.
  void require_supported(const Tensor& t, const char* what, const char* op) const override;

 private:
  struct Launch;   // the two timing events of one launch
  struct Record;   // what a handle waits on: a Launch once launched
  struct Queued;   // a send or recv waiting for flush_point_to_point()
  class Pending;

  void release();  // the destructor's work, also for a constructor that throws
  std::shared_ptr<Launch> begin_launch();
  void end_launch(const Launch& launch);
  std::unique_ptr<PendingOp> launched(std::shared_ptr<Launch> launch, std::vector<Tensor> keep_alive, CollectiveOp op,
                                      std::int64_t elements);
  std::unique_ptr<PendingOp> queue(bool is_send, const Tensor& buffer, int peer);

  MPI_Comm comm_;
  const CudaBackend* backend_;
  std::shared_ptr<NcclRankContext> context_;
  std::vector<int> world_ranks_;
  ncclComm_t nccl_ = nullptr;
  bool split_ = false;
  cudaStream_t stream_ = nullptr;
  Tensor barrier_word_;  // the 1-element all-reduce of barrier()
  std::vector<Queued> queued_;
};

// Takes ownership of `group_comm` (and `nccl`); see NcclCommunicator.
std::unique_ptr<Communicator> make_nccl_communicator(std::string name, MPI_Comm group_comm,
                                                     CommLedger* ledger, const CudaBackend& backend,
                                                     std::shared_ptr<NcclRankContext> context = nullptr,
                                                     ncclComm_t nccl = nullptr);

}  // namespace mdtp
