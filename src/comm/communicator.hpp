#pragma once
// Communicator: one process group.  The public methods are non-virtual and are the single place
// where calls are validated and recorded in the CommLedger; implementations (MPI, NCCL) override
// the protected start_* hooks, each of which starts the operation and returns a handle.
//
// Conventions:
//  - all_gather / reduce_scatter work along dimension 0 of row-major tensors: the gathered
//    tensor is the rank-ordered concatenation of the group's shards (equal sizes).
//  - roots and peers are group-local ranks (0 .. size()-1), never global ranks.
//  - in-place all_reduce and broadcast; reduce writes `out` on the root only (other ranks may pass
//    an undefined tensor); on the root `out` may be `in` itself (in place).
//  - all_gather is in place when `shard` is exactly this rank's slot of `gathered` (NCCL's rule);
//    any other overlap of input and output memory is refused.
//  - every argument is validated here, before the implementation is called, so a bad call throws
//    mdtp::Error on every rank that makes it and starts nothing.
//  - non-blocking variants return a CommHandle; the ledger entry is written when it is waited on
//    (its time is issue → completion), so entries appear in completion order (sendrecv: the
//    send, then the receive).  A handle destroyed without wait(), or assigned over while active,
//    waits first.  A call issued while the ledger is disabled is not recorded.
//  - with the ledger's sync timing on, a blocking collective (all_reduce, all_gather,
//    reduce_scatter, broadcast, reduce) first waits at a barrier on its group, recorded as the
//    entry's wait_seconds and not as an entry (comm/ledger.hpp); its seconds is then the transfer.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/ledger.hpp"
#include "comm/run_clock.hpp"
#include "core/tensor.hpp"

namespace mdtp {

enum class ReduceOp : std::uint8_t { sum, max, min };
const char* reduce_op_name(ReduceOp op);

// What an implementation returns for an operation in flight.  It holds copies of the tensors
// the operation reads or writes (a Tensor shares its storage), so that a caller dropping its
// own references early cannot free memory still in use; its destructor must wait for an
// operation that was never waited on.
class PendingOp {
 public:
  virtual ~PendingOp() = default;
  virtual void wait() = 0;
  virtual bool test() = 0;  // true once complete (then wait() returns at once)
  // Implementations whose work runs asynchronously on a device (NCCL on a CUDA stream) report
  // the device time here after completion; the ledger prefers it to the host clock, which
  // would measure only the enqueue.
  virtual std::optional<double> device_seconds() const { return std::nullopt; }
};

class CommLedger;

class CommHandle {
 public:
  CommHandle() = default;
  // `ledger` null: nothing is recorded.  `issued` is when the operation was started.
  CommHandle(std::unique_ptr<PendingOp> pending, CommLedger* ledger, LedgerEntry entry,
             RunClock::time_point issued);
  CommHandle(CommHandle&&) noexcept;
  CommHandle& operator=(CommHandle&&) noexcept;
  ~CommHandle();
  void wait();
  bool test();  // true once complete (and then recorded); true for an inactive handle
  bool active() const { return pending_ != nullptr; }

 private:
  void finish();
  std::unique_ptr<PendingOp> pending_;
  CommLedger* ledger_ = nullptr;
  LedgerEntry entry_;
  RunClock::time_point start_;
};

class Communicator {
 public:
  Communicator(std::string name, int rank, int size, CommLedger* ledger)
      : name_(std::move(name)), rank_(rank), size_(size), ledger_(ledger) {}
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  const std::string& name() const { return name_; }  // mesh group name, e.g. "tp.row"
  int rank() const { return rank_; }                   // rank inside this group
  int size() const { return size_; }
  CommLedger* ledger() const { return ledger_; }
  virtual const char* backend_name() const = 0;       // "mpi", "nccl", "self"
  virtual std::vector<int> world_ranks() const = 0;   // members, by group rank

  // Blocking collectives (each = the non-blocking one + wait).
  void all_reduce(Tensor& buffer, ReduceOp op = ReduceOp::sum);
  void all_gather(const Tensor& shard, Tensor& gathered);
  void reduce_scatter(const Tensor& full, Tensor& shard, ReduceOp op = ReduceOp::sum);
  void broadcast(Tensor& buffer, int root);
  void reduce(const Tensor& in, Tensor& out, int root, ReduceOp op = ReduceOp::sum);
  void send(const Tensor& buffer, int peer, int tag = 0);
  void recv(Tensor& buffer, int peer, int tag = 0);
  // Sends `out` to `dst` and receives `in` from `src` (a ring shift, a pipeline hand-over).
  void sendrecv(const Tensor& out, int dst, Tensor& in, int src, int tag = 0);
  void barrier();

  // Non-blocking collectives.
  [[nodiscard]] CommHandle iall_reduce(Tensor& buffer, ReduceOp op = ReduceOp::sum);
  [[nodiscard]] CommHandle iall_gather(const Tensor& shard, Tensor& gathered);
  [[nodiscard]] CommHandle ireduce_scatter(const Tensor& full, Tensor& shard, ReduceOp op = ReduceOp::sum);
  [[nodiscard]] CommHandle ibroadcast(Tensor& buffer, int root);
  [[nodiscard]] CommHandle ireduce(const Tensor& in, Tensor& out, int root, ReduceOp op = ReduceOp::sum);
  [[nodiscard]] CommHandle isend(const Tensor& buffer, int peer, int tag = 0);
  [[nodiscard]] CommHandle irecv(Tensor& buffer, int peer, int tag = 0);

 protected:
  virtual std::unique_ptr<PendingOp> start_all_reduce(Tensor& buffer, ReduceOp op) = 0;
  virtual std::unique_ptr<PendingOp> start_all_gather(const Tensor& shard, Tensor& gathered) = 0;
  virtual std::unique_ptr<PendingOp> start_reduce_scatter(const Tensor& full, Tensor& shard, ReduceOp op) = 0;
  virtual std::unique_ptr<PendingOp> start_broadcast(Tensor& buffer, int root) = 0;
  virtual std::unique_ptr<PendingOp> start_reduce(const Tensor& in, Tensor& out, int root, ReduceOp op) = 0;
  virtual std::unique_ptr<PendingOp> start_send(const Tensor& buffer, int peer, int tag) = 0;
  virtual std::unique_ptr<PendingOp> start_recv(Tensor& buffer, int peer, int tag) = 0;
  virtual std::unique_ptr<PendingOp> start_barrier() = 0;
  // Throws mdtp::Error unless this implementation can carry `t` (its dtype, its device).  Called
  // for every buffer during validation, so that a refused call starts nothing (a sendrecv
  // whose send buffer is refused must not leave its receive posted).
  virtual void require_supported(const Tensor& t, const char* what, const char* op) const {}

 private:
  // Captures the phase and the clock, calls `start` (a start_* hook) and wraps its PendingOp.
  // `synchronise`: a blocking collective, timed after a barrier when the ledger asks for it.
  template <class Start>
  CommHandle launch(CollectiveOp op, std::int64_t elements, DType dtype, bool synchronise, Start&& start);
  // The validated calls behind the blocking and non-blocking collectives.
  CommHandle issue_all_reduce(Tensor& buffer, ReduceOp op, bool synchronise);
  CommHandle issue_all_gather(const Tensor& shard, Tensor& gathered, bool synchronise);
  CommHandle issue_reduce_scatter(const Tensor& full, Tensor& shard, ReduceOp op, bool synchronise);
  CommHandle issue_broadcast(Tensor& buffer, int root, bool synchronise);
  CommHandle issue_reduce(const Tensor& in, Tensor& out, int root, ReduceOp op, bool synchronise);
  void require_rank(int rank, const char* role, const char* op) const;
  void require_buffer(const Tensor& t, const char* what, const char* op) const;
  std::string name_;
  int rank_;
  int size_;
  CommLedger* ledger_;
};

}  // namespace mdtp
