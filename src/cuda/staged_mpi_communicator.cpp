#include "cuda/staged_mpi_communicator.hpp"

#include <climits>
#include <functional>
#include <string>
#include <utility>

#include "comm/mpi_communicator.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/device_of_pointer.hpp"

namespace mdtp {
namespace {

int group_value(MPI_Comm comm, int (*query)(MPI_Comm, int*), const char* call) {
  require(comm != MPI_COMM_NULL, "staged MPI communicator needs a group communicator; got MPI_COMM_NULL");
  int value = 0;
  check_mpi(query(comm, &value), call);
  return value;
}

}  // namespace

// The inner MPI operation, then (once) the copy of its results back to the device.
class StagedMpiCommunicator::Pending final : public PendingOp {
 public:
  Pending(CommHandle inner, std::function<void()> finish) : finish_(std::move(finish)), inner_(std::move(inner)) {}
  void wait() override {
    inner_.wait();
    complete();
  }
  bool test() override {
    if (!inner_.test()) return false;
    complete();
    return true;
  }

 private:
  void complete() {
    if (finish_) std::exchange(finish_, nullptr)();
  }
  // Declared first so destroyed last: `finish_` holds the host buffers the MPI operation in
  // `inner_` uses, and a handle dropped unwaited waits in its destructor.
  std::function<void()> finish_;
  CommHandle inner_;
};

StagedMpiCommunicator::StagedMpiCommunicator(std::string name, MPI_Comm group_comm, CommLedger* ledger,
                                             const CudaBackend& backend, WaitPolicy policy,
                                             std::shared_ptr<Allocator> host_staging)
    : Communicator(name, group_value(group_comm, MPI_Comm_rank, "MPI_Comm_rank"),
                   group_value(group_comm, MPI_Comm_size, "MPI_Comm_size"), ledger),
      backend_(&backend),
      host_(host_staging ? std::move(host_staging) : std::make_shared<HostAllocator>()),
      silent_ledger_(std::make_unique<CommLedger>()) {
  silent_ledger_->set_enabled(false);
  inner_ = make_mpi_communicator(std::move(name), group_comm, silent_ledger_.get(), policy);
}

StagedMpiCommunicator::~StagedMpiCommunicator() = default;

void StagedMpiCommunicator::require_supported(const Tensor& t, const char* what, const char* op) const {
  require(t.device() == DeviceKind::cuda, "staged MPI communicator '", name(), "': ", op, " ", what, " lives on ",
          device_name(t.device()), "; it carries device tensors (use the MPI communicator for host ones)");
  require(t.numel() <= INT_MAX, "staged MPI communicator '", name(), "': ", op, " ", what, " has ", t.numel(),
          " elements; MPI carries at most ", INT_MAX, " per call");
  require_memory_of_device(t, backend_->device_index(), "staged MPI communicator '" + name() + "': " + op + " " + what);
}

Tensor StagedMpiCommunicator::host_like(const Tensor& device) const {
  return Tensor::empty(device.shape(), device.dtype(), host_, MemCategory::communication);
}

Tensor StagedMpiCommunicator::download(const Tensor& device) const {
  Tensor host = host_like(device);
  if (device.numel() == 0) return host;
  // The copy is ordered after the compute stream's work on `device`; MPI needs it finished.
  MDTP_CUDA_CHECK(cudaMemcpyAsync(host.raw_data(), device.raw_data(), device.bytes(), cudaMemcpyDeviceToHost,
                                  backend_->stream()));
  backend_->synchronize();
  return host;
}

void StagedMpiCommunicator::upload(const Tensor& host, Tensor& device) const {
  if (device.numel() == 0) return;
  MDTP_CUDA_CHECK(cudaMemcpyAsync(device.raw_data(), host.raw_data(), device.bytes(), cudaMemcpyHostToDevice,
                                  backend_->stream()));
  backend_->synchronize();  // the host staging tensor may die after this
}

std::unique_ptr<PendingOp> StagedMpiCommunicator::start_all_reduce(Tensor& buffer, ReduceOp op) {
  Tensor host = download(buffer);
  CommHandle h = inner_->iall_reduce(host, op);
  return std::make_unique<Pending>(std::move(h), [this, host, buffer]() mutable { upload(host, buffer); });
}

std::unique_ptr<PendingOp> StagedMpiCommunicator::start_all_gather(const Tensor& shard, Tensor& gathered) {
  Tensor host_shard = download(shard);
  Tensor host_gathered = host_like(gathered);
  CommHandle h = inner_->iall_gather(host_shard, host_gathered);
  return std::make_unique<Pending>(std::move(h), [this, host_shard, host_gathered, gathered]() mutable {
    upload(host_gathered, gathered);
  });
}

std::unique_ptr<PendingOp> StagedMpiCommunicator::start_reduce_scatter(const Tensor& full, Tensor& shard, ReduceOp op) {
  Tensor host_full = download(full);
  Tensor host_shard = host_like(shard);
  CommHandle h = inner_->ireduce_scatter(host_full, host_shard, op);
  return std::make_unique<Pending>(std::move(h), [this, host_full, host_shard, shard]() mutable {
    upload(host_shard, shard);
  });
}

std::unique_ptr<PendingOp> StagedMpiCommunicator::start_broadcast(Tensor& buffer, int root) {
  Tensor host = download(buffer);
  CommHandle h = inner_->ibroadcast(host, root);
  return std::make_unique<Pending>(std::move(h), [this, host, buffer]() mutable { upload(host, buffer); });
}

std::unique_ptr<PendingOp> StagedMpiCommunicator::start_reduce(const Tensor& in, Tensor& out, int root, ReduceOp op) {
  Tensor host_in = download(in);
  Tensor host_out;  // undefined off the root, as the caller's `out` may be
  if (rank() == root) host_out = host_like(out);
  CommHandle h = inner_->ireduce(host_in, host_out, root, op);
  return std::make_unique<Pending>(std::move(h), [this, host_in, host_out, out]() mutable {
    if (host_out.defined()) upload(host_out, out);
  });
}

std::unique_ptr<PendingOp> StagedMpiCommunicator::start_send(const Tensor& buffer, int peer, int tag) {
  Tensor host = download(buffer);
  CommHandle h = inner_->isend(host, peer, tag);
  return std::make_unique<Pending>(std::move(h), [host] {});
}

std::unique_ptr<PendingOp> StagedMpiCommunicator::start_recv(Tensor& buffer, int peer, int tag) {
  Tensor host = host_like(buffer);
  CommHandle h = inner_->irecv(host, peer, tag);
  return std::make_unique<Pending>(std::move(h), [this, host, buffer]() mutable { upload(host, buffer); });
}

std::unique_ptr<PendingOp> StagedMpiCommunicator::start_barrier() {
  // Device work issued before the barrier is finished when it returns, as with NCCL's.
  backend_->synchronize();
  inner_->barrier();
  return std::make_unique<Pending>(CommHandle(), nullptr);
}

std::unique_ptr<Communicator> make_staged_mpi_communicator(std::string name, MPI_Comm group_comm, CommLedger* ledger,
                                                           const CudaBackend& backend, WaitPolicy policy,
                                                           std::shared_ptr<Allocator> host_staging) {
  return std::make_unique<StagedMpiCommunicator>(std::move(name), group_comm, ledger, backend, policy,
                                                 std::move(host_staging));
}

}  // namespace mdtp
