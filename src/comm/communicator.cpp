// Communicator's public methods: the one place where calls are validated and recorded.
// Validation happens before the start_* hook is called, so a refused call starts nothing on any
// rank that makes it, and the messages name the group, the op and the offending values.
#include "comm/communicator.hpp"

#include <utility>

#include "core/error.hpp"

namespace mdtp {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
  }
  return "?";
}

// ---- CommHandle -------------------------------------------------------------------------------

CommHandle::CommHandle(std::unique_ptr<PendingOp> pending, CommLedger* ledger, LedgerEntry entry,
                       RunClock::time_point issued)
    : pending_(std::move(pending)), ledger_(ledger), entry_(std::move(entry)), start_(issued) {
  require(pending_ != nullptr, "CommHandle for ", collective_name(entry_.op), " on group '",
          entry_.group, "' got no pending operation");
}

CommHandle::CommHandle(CommHandle&& other) noexcept
    : pending_(std::move(other.pending_)),
      ledger_(std::exchange(other.ledger_, nullptr)),
      entry_(std::move(other.entry_)),
      start_(other.start_) {}

CommHandle& CommHandle::operator=(CommHandle&& other) noexcept {
  if (this != &other) {
    // The operation this handle still owns must complete (and be recorded) before it is
    // forgotten: its buffers are in use until then.
    if (pending_) finish();
    pending_ = std::move(other.pending_);
    ledger_ = std::exchange(other.ledger_, nullptr);
    entry_ = std::move(other.entry_);
    start_ = other.start_;
  }
  return *this;
}

// An error while waiting here terminates the program (destructors are noexcept): a collective
// that failed on one rank cannot be recovered from anyway, and silence would hide it.
CommHandle::~CommHandle() {
  if (pending_) finish();
}

void CommHandle::wait() {
  if (pending_) finish();
}

bool CommHandle::test() {
  if (!pending_) return true;
  if (!pending_->test()) return false;
  finish();
  return true;
}

void CommHandle::finish() {
  // Taken out first: whether wait() returns or throws, the handle is inactive afterwards and
  // never waits (or records) twice.
  std::unique_ptr<PendingOp> pending = std::move(pending_);
  CommLedger* ledger = std::exchange(ledger_, nullptr);
  pending->wait();
  auto done = RunClock::now();
  if (ledger == nullptr) return;
  auto device = pending->device_seconds();
  entry_.seconds = device ? *device : std::chrono::duration<double>(done - start_).count();
  ledger->record(std::move(entry_));
}

// ---- validation helpers -----------------------------------------------------------------------

namespace {

void require_same_dtype(const Tensor& a, const char* a_name, const Tensor& b, const char* b_name,
                        const char* op, const std::string& group) {
  require(a.dtype() == b.dtype(), op, " on group '", group, "': ", a_name, " is ",
          dtype_name(a.dtype()), " but ", b_name, " is ", dtype_name(b.dtype()),
          "; expected the same dtype");
  require(a.device() == b.device(), op, " on group '", group, "': ", a_name, " is on ",
          device_name(a.device()), " but ", b_name, " is on ", device_name(b.device()));
}

bool overlaps(const Tensor& a, const Tensor& b) {
  if (a.bytes() == 0 || b.bytes() == 0) return false;
  auto* a0 = static_cast<const char*>(a.raw_data());
  auto* b0 = static_cast<const char*>(b.raw_data());
  return a0 < b0 + b.bytes() && b0 < a0 + a.bytes();
}

// `full` must be `shard` stacked `size` times along dimension 0 (all_gather, reduce_scatter).
void require_stacked(const Tensor& shard, const char* shard_name, const Tensor& full,
                     const char* full_name, int size, const char* op, const std::string& group) {
  require(shard.ndim() >= 1, op, " on group '", group, "' works along dimension 0; ", shard_name,
          " has shape ", shape_string(shard.shape()));
  Shape expected = shard.shape();
  expected[0] *= size;
  require(full.shape() == expected, op, " on group '", group, "' of size ", size, ": ", full_name,
          " has shape ", shape_string(full.shape()), "; expected ", shape_string(expected), " (",
          shard_name, " ", shape_string(shard.shape()), " stacked ", size,
          " times along dimension 0)");
}

}  // namespace

void Communicator::require_buffer(const Tensor& t, const char* what, const char* op) const {
  require(t.defined(), op, " on group '", name_, "': ", what, " is an undefined tensor");
  require_supported(t, what, op);
}

void Communicator::require_rank(int rank, const char* role, const char* op) const {
  require(0 <= rank && rank < size_, op, " on group '", name_, "' of size ", size_, " needs a ",
          role, " in [0, ", size_, "); got ", role, "=", rank);
}

template <class Start>
CommHandle Communicator::launch(CollectiveOp op, std::int64_t elements, DType dtype, bool synchronise, Start&& start) {
  CommLedger* ledger = (ledger_ != nullptr && ledger_->enabled()) ? ledger_ : nullptr;
  LedgerEntry entry;
  auto arrived = RunClock::now();
  if (ledger != nullptr) {
    entry = make_ledger_entry(op, name_, size_, elements, dtype, ledger->phase());
    entry.arrived = std::chrono::duration<double>(arrived.time_since_epoch()).count();
    if (synchronise && ledger->sync_timing()) {
      // Measurement only: the barrier is not an entry (comm/ledger.hpp), its time is the wait
      // for the last member of the group; on one rank nobody is waited for.
      if (size_ > 1) start_barrier()->wait();
      auto everybody_there = RunClock::now();
      entry.wait_seconds = std::chrono::duration<double>(everybody_there - arrived).count();
      entry.synchronised = true;
      arrived = everybody_there;
    }
  }
  std::unique_ptr<PendingOp> pending = start();
  return CommHandle(std::move(pending), ledger, std::move(entry), arrived);
}

// ---- validated calls (non-blocking, and the blocking ones with `synchronise`) -----------------------------------------------------------------------------

CommHandle Communicator::issue_all_reduce(Tensor& buffer, ReduceOp op, bool synchronise) {
  require_buffer(buffer, "buffer", "all_reduce");
  return launch(CollectiveOp::all_reduce, buffer.numel(), buffer.dtype(), synchronise,
                [&] { return start_all_reduce(buffer, op); });
}

CommHandle Communicator::issue_all_gather(const Tensor& shard, Tensor& gathered, bool synchronise) {
  require_buffer(shard, "shard", "all_gather");
  require_buffer(gathered, "gathered", "all_gather");
  require_same_dtype(shard, "shard", gathered, "gathered", "all_gather", name_);
  require_stacked(shard, "shard", gathered, "gathered", size_, "all_gather", name_);
  if (overlaps(shard, gathered)) {
    auto slot = static_cast<const char*>(gathered.raw_data()) + shard.bytes() * static_cast<std::size_t>(rank_);
    require(shard.raw_data() == slot, "all_gather on group '", name_, "': shard overlaps gathered ",
            "but is not this rank's slot (rows ", shard.dim(0) * rank_, "..", shard.dim(0) * (rank_ + 1),
            "); an in-place all_gather passes gathered.row_slice of its own slot");
  }
  return launch(CollectiveOp::all_gather, gathered.numel(), gathered.dtype(), synchronise,
                [&] { return start_all_gather(shard, gathered); });
}

CommHandle Communicator::issue_reduce_scatter(const Tensor& full, Tensor& shard, ReduceOp op, bool synchronise) {
  require_buffer(full, "full", "reduce_scatter");
  require_buffer(shard, "shard", "reduce_scatter");
  require_same_dtype(full, "full", shard, "shard", "reduce_scatter", name_);
  require_stacked(shard, "shard", full, "full", size_, "reduce_scatter", name_);
  require(!overlaps(full, shard), "reduce_scatter on group '", name_,
          "': shard overlaps full; expected separate buffers");
  return launch(CollectiveOp::reduce_scatter, full.numel(), full.dtype(), synchronise,
                [&] { return start_reduce_scatter(full, shard, op); });
}

CommHandle Communicator::issue_broadcast(Tensor& buffer, int root, bool synchronise) {
  require_rank(root, "root", "broadcast");
  require_buffer(buffer, "buffer", "broadcast");
  return launch(CollectiveOp::broadcast, buffer.numel(), buffer.dtype(), synchronise,
                [&] { return start_broadcast(buffer, root); });
}

CommHandle Communicator::issue_reduce(const Tensor& in, Tensor& out, int root, ReduceOp op, bool synchronise) {
  require_rank(root, "root", "reduce");
  require_buffer(in, "in", "reduce");
  if (rank_ == root) {
    require_buffer(out, "out (on the root)", "reduce");
    require_same_dtype(in, "in", out, "out", "reduce", name_);
    require(out.numel() == in.numel(), "reduce on group '", name_, "': out has shape ",
            shape_string(out.shape()), " but in has shape ", shape_string(in.shape()),
            "; expected the same number of elements on the root");
    require(!overlaps(in, out) || in.raw_data() == out.raw_data(), "reduce on group '", name_,
            "': out partly overlaps in; expected the same buffer (in place) or separate ones");
  }
  return launch(CollectiveOp::reduce, in.numel(), in.dtype(), synchronise,
                [&] { return start_reduce(in, out, root, op); });
}

CommHandle Communicator::iall_reduce(Tensor& buffer, ReduceOp op) { return issue_all_reduce(buffer, op, false); }

CommHandle Communicator::iall_gather(const Tensor& shard, Tensor& gathered) {
  return issue_all_gather(shard, gathered, false);
}

CommHandle Communicator::ireduce_scatter(const Tensor& full, Tensor& shard, ReduceOp op) {
  return issue_reduce_scatter(full, shard, op, false);
}

CommHandle Communicator::ibroadcast(Tensor& buffer, int root) { return issue_broadcast(buffer, root, false); }

CommHandle Communicator::ireduce(const Tensor& in, Tensor& out, int root, ReduceOp op) {
  return issue_reduce(in, out, root, op, false);
}

CommHandle Communicator::isend(const Tensor& buffer, int peer, int tag) {
  require_rank(peer, "peer", "send");
  require(tag >= 0, "send on group '", name_, "': tag must be non-negative; got tag=", tag);
  require_buffer(buffer, "buffer", "send");
  return launch(CollectiveOp::send, buffer.numel(), buffer.dtype(), false,
                [&] { return start_send(buffer, peer, tag); });
}

CommHandle Communicator::irecv(Tensor& buffer, int peer, int tag) {
  require_rank(peer, "peer", "recv");
  require(tag >= 0, "recv on group '", name_, "': tag must be non-negative; got tag=", tag);
  require_buffer(buffer, "buffer", "recv");
  return launch(CollectiveOp::recv, buffer.numel(), buffer.dtype(), false,
                [&] { return start_recv(buffer, peer, tag); });
}

// ---- blocking ---------------------------------------------------------------------------------

// A blocking collective is issued with `synchronise`: under sync timing it waits at a barrier
// on its group first (launch).
void Communicator::all_reduce(Tensor& buffer, ReduceOp op) { issue_all_reduce(buffer, op, true).wait(); }

void Communicator::all_gather(const Tensor& shard, Tensor& gathered) {
  issue_all_gather(shard, gathered, true).wait();
}

void Communicator::reduce_scatter(const Tensor& full, Tensor& shard, ReduceOp op) {
  issue_reduce_scatter(full, shard, op, true).wait();
}

void Communicator::broadcast(Tensor& buffer, int root) { issue_broadcast(buffer, root, true).wait(); }

void Communicator::reduce(const Tensor& in, Tensor& out, int root, ReduceOp op) {
  issue_reduce(in, out, root, op, true).wait();
}

void Communicator::send(const Tensor& buffer, int peer, int tag) { isend(buffer, peer, tag).wait(); }

void Communicator::recv(Tensor& buffer, int peer, int tag) { irecv(buffer, peer, tag).wait(); }

void Communicator::sendrecv(const Tensor& out, int dst, Tensor& in, int src, int tag) {
  // Both sides are validated before either starts, so a bad src cannot leave a send in flight.
  require_rank(dst, "dst", "sendrecv");
  require_rank(src, "src", "sendrecv");
  require(tag >= 0, "sendrecv on group '", name_, "': tag must be non-negative; got tag=", tag);
  require_buffer(out, "out", "sendrecv");
  require_buffer(in, "in", "sendrecv");
  require(!overlaps(out, in), "sendrecv on group '", name_,
          "': in overlaps out; expected separate buffers");
  // The receive is posted first so that the matching send never waits for it; the ledger gets
  // the send, then the receive.
  CommHandle received = irecv(in, src, tag);
  CommHandle sent = isend(out, dst, tag);
  sent.wait();
  received.wait();
}

void Communicator::barrier() {
  launch(CollectiveOp::barrier, 0, DType::f32, false, [&] { return start_barrier(); }).wait();
}

}  // namespace mdtp
