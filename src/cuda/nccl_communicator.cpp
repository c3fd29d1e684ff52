#include "cuda/nccl_communicator.hpp"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "comm/collective_watchdog.hpp"
#include "comm/wait_policy.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/device_of_pointer.hpp"
#include "cuda/nccl_bootstrap.hpp"

namespace mdtp {
namespace {

// Every DType has an NCCL type (bf16 since NCCL 2.10, which the build requires); validation
// (require_supported) asks nccl_has_type first, so nccl_type never throws after it.
bool nccl_has_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
    case DType::f64:
    case DType::bf16:
    case DType::f16: return true;
  }
  return false;
}

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::bf16: return ncclBfloat16;
    case DType::f16: return ncclFloat16;
  }
  throw_error("NCCL: unknown dtype code ", static_cast<int>(dtype));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
  }
  throw_error("NCCL: unknown reduce op code ", static_cast<int>(op));
}

std::size_t count_of(const Tensor& t) { return static_cast<std::size_t>(t.numel()); }

}  // namespace

struct NcclCommunicator::Launch {
  cudaEvent_t start = nullptr, end = nullptr;
  Launch() {
    MDTP_CUDA_CHECK(cudaEventCreate(&start));
    cudaError_t status = cudaEventCreate(&end);
    if (status != cudaSuccess) {
      cudaEventDestroy(start);
      MDTP_CUDA_CHECK(status);
    }
  }
  ~Launch() {
    cuda_ok_in_destructor(cudaEventDestroy(start), "cudaEventDestroy");
    cuda_ok_in_destructor(cudaEventDestroy(end), "cudaEventDestroy");
  }
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;
};

struct NcclCommunicator::Record {
  std::shared_ptr<Launch> launch;  // null while queued
};

struct NcclCommunicator::Queued {
  bool is_send;
  Tensor buffer;  // kept alive until launched
  int peer;
  std::shared_ptr<Record> record;
};

class NcclCommunicator::Pending final : public PendingOp {
 public:
  Pending(NcclCommunicator* owner, std::shared_ptr<Record> record, std::vector<Tensor> keep_alive, CollectiveOp op,
          std::int64_t elements)
      : owner_(owner), record_(std::move(record)), keep_alive_(std::move(keep_alive)), op_(op), elements_(elements) {}
  ~Pending() override {
    // Buffers must not return to the pool while NCCL may still use them.
    if (!done_ && record_->launch) cuda_ok_in_destructor(cudaEventSynchronize(record_->launch->end), "cudaEventSynchronize");
  }
  void wait() override {
    if (done_) return;
    launch_if_queued();
    wait_within_deadline();
    finish();
  }
  bool test() override {
    if (done_) return true;
    launch_if_queued();
    cudaError_t status = cudaEventQuery(record_->launch->end);
    if (status == cudaErrorNotReady) return false;
    MDTP_CUDA_CHECK(status);
    finish();
    return true;
  }
  std::optional<double> device_seconds() const override { return seconds_; }

 private:
  void launch_if_queued() {
    if (!record_->launch) owner_->context().flush_point_to_point();
    require(record_->launch != nullptr, "NCCL communicator '", owner_->name(),
            "': a send/recv was never launched because an earlier launch of its batch failed");
  }
  // The collective deadline (comm/collective_watchdog.hpp) on a device wait: the event is polled
  // instead of synchronised on, and when the deadline passes the NCCL communicator is aborted
  // (ncclCommAbort: the kernels waiting for a silent peer return and the GPU is released) before
  // the line is printed and the job aborted.
  void wait_within_deadline() {
    CollectiveWatchdog& watchdog = CollectiveWatchdog::process();
    if (!watchdog.enabled()) {
      MDTP_CUDA_CHECK(cudaEventSynchronize(record_->launch->end));
      return;
    }
    const auto since = std::chrono::steady_clock::now();
    const std::chrono::duration<double> timeout(watchdog.timeout());
    for (;;) {
      const cudaError_t status = cudaEventQuery(record_->launch->end);
      if (status == cudaSuccess) return;
      if (status != cudaErrorNotReady) MDTP_CUDA_CHECK(status);
      if (std::chrono::steady_clock::now() - since > timeout) {
        if (owner_->nccl_ != nullptr) ncclCommAbort(owner_->nccl_);
        owner_->nccl_ = nullptr;  // aborted: its destructor must not destroy it again
        abort_on_deadline(WaitLabel{owner_->name(), collective_name(op_), elements_, owner_->ledger()},
                          watchdog.timeout());
      }
      std::this_thread::yield();
    }
  }
  void finish() {
    float ms = 0.0f;
    MDTP_CUDA_CHECK(cudaEventElapsedTime(&ms, record_->launch->start, record_->launch->end));
    seconds_ = ms * 1e-3;
    done_ = true;
    keep_alive_.clear();
  }
  NcclCommunicator* owner_;
  std::shared_ptr<Record> record_;
  std::vector<Tensor> keep_alive_;
  CollectiveOp op_;
  std::int64_t elements_;
  bool done_ = false;
  std::optional<double> seconds_;
};

void NcclRankContext::flush_point_to_point() {
  for (NcclCommunicator* member : members_) member->flush_point_to_point();
}

NcclCommunicator::NcclCommunicator(std::string name, MPI_Comm group_comm, CommLedger* ledger,
                                   const CudaBackend& backend, std::shared_ptr<NcclRankContext> context,
                                   ncclComm_t nccl)
    : Communicator(std::move(name), [&] {
        require(group_comm != MPI_COMM_NULL, "NCCL communicator needs a group communicator; got MPI_COMM_NULL");
        int r = 0;
        check_mpi(MPI_Comm_rank(group_comm, &r), "MPI_Comm_rank");
        return r;
      }(), [&] {
        int s = 0;
        check_mpi(MPI_Comm_size(group_comm, &s), "MPI_Comm_size");
        return s;
      }(), ledger),
      comm_(group_comm),
      backend_(&backend),
      context_(context ? std::move(context) : std::make_shared<NcclRankContext>()),
      nccl_(nccl),
      split_(nccl != nullptr) {
  context_->members_.push_back(this);
  try {
    MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
    check_mpi(MPI_Comm_group(comm_, &group), "MPI_Comm_group");
    check_mpi(MPI_Comm_group(MPI_COMM_WORLD, &world), "MPI_Comm_group");
    std::vector<int> local(static_cast<std::size_t>(size()));
    for (int i = 0; i < size(); ++i) local[static_cast<std::size_t>(i)] = i;
    world_ranks_.resize(local.size());
    const int translated = MPI_Group_translate_ranks(group, size(), local.data(), world, world_ranks_.data());
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    check_mpi(translated, "MPI_Group_translate_ranks");
    MDTP_CUDA_CHECK(cudaSetDevice(backend_->device_index()));
    MDTP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    if (!nccl_) nccl_ = nccl_init_rank_over(comm_, backend_->device_index(), "NCCL communicator '" + this->name() + "'");
    // A communicator handed in must be this very group; collectives would silently mix ranks.
    int nccl_rank = -1, nccl_size = -1;
    MDTP_CUDA_CHECK(ncclCommUserRank(nccl_, &nccl_rank));
    MDTP_CUDA_CHECK(ncclCommCount(nccl_, &nccl_size));
    require(nccl_rank == rank() && nccl_size == size(), "NCCL communicator '", this->name(), "': the NCCL ",
            "communicator has rank ", nccl_rank, " of ", nccl_size, "; expected the group's rank ", rank(), " of ",
            size());
  } catch (...) {
    release();
    throw;
  }
}

NcclCommunicator::~NcclCommunicator() { release(); }

void NcclCommunicator::release() {
  std::erase(context_->members_, this);
  queued_.clear();  // never launched: their handles are gone (a handle waits before it dies)
  barrier_word_ = Tensor();
  if (stream_) cuda_ok_in_destructor(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  if (nccl_) ncclCommDestroy(nccl_);
  if (stream_) cuda_ok_in_destructor(cudaStreamDestroy(stream_), "cudaStreamDestroy");
  nccl_ = nullptr;
  stream_ = nullptr;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_SELF && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void NcclCommunicator::require_supported(const Tensor& t, const char* what, const char* op) const {
  require(t.device() == DeviceKind::cuda, "NCCL communicator '", name(), "': ", op, " ", what, " lives on ",
          device_name(t.device()), "; NCCL carries device tensors (the MPI communicator carries host ones)");
  require(nccl_has_type(t.dtype()), "NCCL communicator '", name(), "': ", op, " ", what, " is ",
          dtype_name(t.dtype()), "; NCCL carries f32, f64, bf16 and f16");
  require_memory_of_device(t, backend_->device_index(), "NCCL communicator '" + name() + "': " + op + " " + what);
}

std::shared_ptr<NcclCommunicator::Launch> NcclCommunicator::begin_launch() {
  auto launch = std::make_shared<Launch>();
  // Ordered after the compute stream's work so far, without a host wait.
  cudaEvent_t ready = nullptr;
  MDTP_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  cudaError_t recorded = cudaEventRecord(ready, backend_->stream());
  cudaError_t waited = recorded == cudaSuccess ? cudaStreamWaitEvent(stream_, ready, 0) : recorded;
  cudaEventDestroy(ready);  // released once the stream has passed it
  MDTP_CUDA_CHECK(waited);
  MDTP_CUDA_CHECK(cudaEventRecord(launch->start, stream_));
  return launch;
}

void NcclCommunicator::end_launch(const Launch& launch) { MDTP_CUDA_CHECK(cudaEventRecord(launch.end, stream_)); }

std::unique_ptr<PendingOp> NcclCommunicator::launched(std::shared_ptr<Launch> launch, std::vector<Tensor> keep_alive,
                                                      CollectiveOp op, std::int64_t elements) {
  auto record = std::make_shared<Record>();
  record->launch = std::move(launch);
  return std::make_unique<Pending>(this, std::move(record), std::move(keep_alive), op, elements);
}

std::unique_ptr<PendingOp> NcclCommunicator::start_all_reduce(Tensor& buffer, ReduceOp op) {
  context_->flush_point_to_point();
  auto launch = begin_launch();
  MDTP_CUDA_CHECK(ncclAllReduce(buffer.raw_data(), buffer.raw_data(), count_of(buffer), nccl_type(buffer.dtype()),
                                nccl_op(op), nccl_, stream_));
  end_launch(*launch);
  return launched(std::move(launch), {buffer}, CollectiveOp::all_reduce, buffer.numel());
}

std::unique_ptr<PendingOp> NcclCommunicator::start_all_gather(const Tensor& shard, Tensor& gathered) {
  context_->flush_point_to_point();
  auto launch = begin_launch();
  MDTP_CUDA_CHECK(ncclAllGather(shard.raw_data(), gathered.raw_data(), count_of(shard), nccl_type(shard.dtype()),
                                nccl_, stream_));
  end_launch(*launch);
  return launched(std::move(launch), {shard, gathered}, CollectiveOp::all_gather, gathered.numel());
}

std::unique_ptr<PendingOp> NcclCommunicator::start_reduce_scatter(const Tensor& full, Tensor& shard, ReduceOp op) {
  context_->flush_point_to_point();
  auto launch = begin_launch();
  MDTP_CUDA_CHECK(ncclReduceScatter(full.raw_data(), shard.raw_data(), count_of(shard), nccl_type(full.dtype()),
                                    nccl_op(op), nccl_, stream_));
  end_launch(*launch);
  return launched(std::move(launch), {full, shard}, CollectiveOp::reduce_scatter, full.numel());
}

std::unique_ptr<PendingOp> NcclCommunicator::start_broadcast(Tensor& buffer, int root) {
  context_->flush_point_to_point();
  auto launch = begin_launch();
  MDTP_CUDA_CHECK(ncclBroadcast(buffer.raw_data(), buffer.raw_data(), count_of(buffer), nccl_type(buffer.dtype()),
                                root, nccl_, stream_));
  end_launch(*launch);
  return launched(std::move(launch), {buffer}, CollectiveOp::broadcast, buffer.numel());
}

std::unique_ptr<PendingOp> NcclCommunicator::start_reduce(const Tensor& in, Tensor& out, int root, ReduceOp op) {
  context_->flush_point_to_point();
  auto launch = begin_launch();
  // Only the root's receive buffer is used (and validated); other ranks may pass anything.
  void* recv = rank() == root ? out.raw_data() : nullptr;
  MDTP_CUDA_CHECK(ncclReduce(in.raw_data(), recv, count_of(in), nccl_type(in.dtype()), nccl_op(op), root, nccl_,
                             stream_));
  end_launch(*launch);
  return launched(std::move(launch), {in, out}, CollectiveOp::reduce, in.numel());
}

std::unique_ptr<PendingOp> NcclCommunicator::start_send(const Tensor& buffer, int peer, int) {
  return queue(true, buffer, peer);
}

std::unique_ptr<PendingOp> NcclCommunicator::start_recv(Tensor& buffer, int peer, int) {
  return queue(false, buffer, peer);
}

std::unique_ptr<PendingOp> NcclCommunicator::queue(bool is_send, const Tensor& buffer, int peer) {
  auto record = std::make_shared<Record>();
  queued_.push_back(Queued{is_send, buffer, peer, record});
  return std::make_unique<Pending>(this, std::move(record), std::vector<Tensor>{buffer},
                                   is_send ? CollectiveOp::send : CollectiveOp::recv, buffer.numel());
}

void NcclCommunicator::flush_point_to_point() {
  if (queued_.empty()) return;
  std::vector<Queued> batch = std::exchange(queued_, {});
  auto launch = begin_launch();
  MDTP_CUDA_CHECK(ncclGroupStart());
  ncclResult_t status = ncclSuccess;
  for (const Queued& q : batch) {
    status = q.is_send ? ncclSend(q.buffer.raw_data(), count_of(q.buffer), nccl_type(q.buffer.dtype()), q.peer, nccl_, stream_)
                       : ncclRecv(q.buffer.raw_data(), count_of(q.buffer), nccl_type(q.buffer.dtype()), q.peer, nccl_, stream_);
    if (status != ncclSuccess) break;
  }
  ncclResult_t ended = ncclGroupEnd();  // always closes the group, even after a failed call
  MDTP_CUDA_CHECK(status);
  MDTP_CUDA_CHECK(ended);
  end_launch(*launch);
  for (Queued& q : batch) q.record->launch = launch;
}

std::unique_ptr<PendingOp> NcclCommunicator::start_barrier() {
  if (!barrier_word_.defined()) barrier_word_ = backend_->zeros({1}, DType::f32, MemCategory::communication);
  context_->flush_point_to_point();
  auto launch = begin_launch();
  MDTP_CUDA_CHECK(ncclAllReduce(barrier_word_.raw_data(), barrier_word_.raw_data(), 1, ncclFloat32, ncclSum, nccl_,
                                stream_));
  end_launch(*launch);
  return launched(std::move(launch), {}, CollectiveOp::barrier, 0);
}

std::unique_ptr<Communicator> make_nccl_communicator(std::string name, MPI_Comm group_comm, CommLedger* ledger,
                                                     const CudaBackend& backend,
                                                     std::shared_ptr<NcclRankContext> context, ncclComm_t nccl) {
  return std::make_unique<NcclCommunicator>(std::move(name), group_comm, ledger, backend, std::move(context), nccl);
}

}  // namespace mdtp
