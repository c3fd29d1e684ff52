#include "comm/mpi_communicator.hpp"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

#include "comm/mpi_half_types.hpp"
#include "comm/ring_collectives.hpp"
#include "comm/run_clock.hpp"
#include "core/error.hpp"

namespace mdtp {
namespace {

// The one place MPI touches tensor memory.  Device tensors will be staged through host buffers
// here (CUDA path); until then require_supported refuses them during validation.
void* mpi_buffer(const Tensor& t) {
  require(t.device() == DeviceKind::host, "the MPI communicator needs host tensors; got a ",
          device_name(t.device()), " tensor of shape ", shape_string(t.shape()));
  return t.raw_data();
}

// Counts were checked against INT_MAX by require_supported.
int mpi_count(std::int64_t elements) { return static_cast<int>(elements); }

// One MPI request in flight.  It keeps the tensors it reads or writes alive until completion, so
// a caller dropping its own reference early cannot free memory MPI still uses.
// It also carries what names it when its wait outlives the collective deadline: the group, the
// op, the element count the ledger records, and the ledger (phase and step at that moment).
class MpiPendingOp final : public PendingOp {
 public:
  MpiPendingOp(WaitPolicy policy, std::vector<Tensor> buffers, std::string group, CollectiveOp op,
               std::int64_t elements, const CommLedger* ledger)
      : policy_(policy),
        buffers_(std::move(buffers)),
        group_(std::move(group)),
        op_(op),
        elements_(elements),
        ledger_(ledger) {}
  ~MpiPendingOp() override {
    // A started collective cannot be cancelled; it must complete before its buffers go away.
    if (request_ != MPI_REQUEST_NULL) wait_mpi_request(request_, MPI_STATUS_IGNORE, policy_, label());
  }
  MPI_Request* request() { return &request_; }

  // For a receive: after completion, the element count must be exactly `elements`.
  void expect_received(std::int64_t elements, MPI_Datatype type, int peer) {
    expected_ = elements;
    type_ = type;
    peer_ = peer;
  }

  void wait() override {
    if (complete_) return;
    MPI_Status status;
    wait_mpi_request(request_, &status, policy_, label());
    on_complete(status);
  }

  bool test() override {
    if (complete_) return true;
    int done = 0;
    MPI_Status status;
    check_mpi(MPI_Test(&request_, &done, &status), "MPI_Test");
    if (done) on_complete(status);
    return done != 0;
  }

 private:
  void on_complete(const MPI_Status& status) {
    complete_ = true;
    buffers_.clear();
    if (expected_ < 0) return;
    int received = 0;
    check_mpi(MPI_Get_count(&status, type_, &received), "MPI_Get_count");
    require(received == expected_, "recv on group '", group_, "' from peer ", peer_, " expected ",
            expected_, " elements but the message held ", received);
  }

  WaitLabel label() const { return WaitLabel{group_, collective_name(op_), elements_, ledger_}; }

  WaitPolicy policy_;
  std::vector<Tensor> buffers_;
  std::string group_;
  CollectiveOp op_;
  std::int64_t elements_;
  const CommLedger* ledger_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  bool complete_ = false;
  std::int64_t expected_ = -1;
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
  int peer_ = -1;
};

int comm_rank(MPI_Comm comm) {
  int rank = 0;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  return rank;
}

int comm_size(MPI_Comm comm) {
  int size = 0;
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  return size;
}

std::vector<int> translate_to_world(MPI_Comm comm, int size) {
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  check_mpi(MPI_Comm_group(comm, &group), "MPI_Comm_group");
  check_mpi(MPI_Comm_group(MPI_COMM_WORLD, &world), "MPI_Comm_group");
  std::vector<int> local(static_cast<std::size_t>(size)), global(static_cast<std::size_t>(size));
  for (int i = 0; i < size; ++i) local[static_cast<std::size_t>(i)] = i;
  check_mpi(MPI_Group_translate_ranks(group, size, local.data(), world, global.data()),
            "MPI_Group_translate_ranks");
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  return global;
}

// A ring collective in flight (comm/ring_collectives.hpp).  For a reduce-scatter the ring works
// on a scratch copy of the input and this rank's block is copied to the shard at completion.
class RingPendingOp final : public PendingOp {
 public:
  RingPendingOp(std::vector<Tensor> buffers, std::vector<unsigned char> scratch, void* shard_out,
                std::size_t shard_bytes)
      : buffers_(std::move(buffers)), scratch_(std::move(scratch)), shard_out_(shard_out), shard_bytes_(shard_bytes) {}
  ~RingPendingOp() override {
    if (ring_ && !complete_) wait();
  }
  std::vector<unsigned char>& scratch() { return scratch_; }
  void start(std::unique_ptr<RingCollective> ring, std::int64_t shard_offset_bytes) {
    ring_ = std::move(ring);
    shard_offset_ = shard_offset_bytes;
    RingProgress::process().add(ring_.get());
    ring_->start();
    if (ring_->done()) finish();
  }
  void wait() override {
    if (complete_) return;
    RingProgress::process().wait_for(*ring_);
    finish();
  }
  bool test() override {
    if (complete_) return true;
    if (RingProgress::process().test(*ring_)) finish();
    return complete_;
  }

 private:
  void finish() {
    if (complete_) return;
    complete_ = true;
    RingProgress::process().remove(ring_.get());
    if (shard_out_ != nullptr && shard_bytes_ > 0) std::memcpy(shard_out_, scratch_.data() + shard_offset_, shard_bytes_);
    buffers_.clear();
  }

  std::vector<Tensor> buffers_;
  std::vector<unsigned char> scratch_;
  void* shard_out_;
  std::size_t shard_bytes_;
  std::int64_t shard_offset_ = 0;
  std::unique_ptr<RingCollective> ring_;
  bool complete_ = false;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(std::string name, MPI_Comm comm, CommLedger* ledger, WaitPolicy policy)
      : Communicator(std::move(name), comm_rank(comm), comm_size(comm), ledger),
        comm_(comm),
        policy_(policy),
        world_ranks_(translate_to_world(comm, size())) {
    void* value = nullptr;
    int found = 0;
    check_mpi(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &value, &found), "MPI_Comm_get_attr");
    if (found) tag_ub_ = *static_cast<int*>(value);
    // Ring traffic gets a communicator of its own, so its tags never meet the caller's sends.
    if (use_rings()) check_mpi(MPI_Comm_dup(comm_, &ring_comm_), "MPI_Comm_dup");
  }

  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && ring_comm_ != MPI_COMM_NULL) MPI_Comm_free(&ring_comm_);
    if (!finalized && comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_SELF) MPI_Comm_free(&comm_);
  }

  const char* backend_name() const override { return "mpi"; }

  void require_supported(const Tensor& t, const char* what, const char* op) const override {
    require(t.device() == DeviceKind::host, op, " on group '", name(),
            "': the MPI communicator needs host tensors; ", what, " is a ", device_name(t.device()),
            " tensor");
    require(t.numel() <= INT_MAX, op, " on group '", name(), "': ", what, " has ", t.numel(),
            " elements, over the MPI count limit of ", INT_MAX, " per call");
  }
  std::vector<int> world_ranks() const override { return world_ranks_; }

 protected:
  std::unique_ptr<PendingOp> start_all_reduce(Tensor& buffer, ReduceOp op) override {
    void* data = mpi_buffer(buffer);
    if (ring_comm_ != MPI_COMM_NULL)
      return start_ring(RingKind::all_reduce, {buffer}, data, buffer.numel(), buffer.dtype(), op, {}, nullptr, 0, 0,
                        buffer.holds_values());
    auto pending = pending_op(CollectiveOp::all_reduce, buffer.numel(), {buffer});
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data, mpi_count(buffer.numel()),
                             types_.datatype(buffer.dtype()), types_.op(buffer.dtype(), op), comm_, pending->request()),
              "MPI_Iallreduce");
    return pending;
  }

  std::unique_ptr<PendingOp> start_all_gather(const Tensor& shard, Tensor& gathered) override {
    void* out = mpi_buffer(gathered);
    const void* in = mpi_buffer(shard);
    if (ring_comm_ != MPI_COMM_NULL) {
      // This rank's block in place first (memmove: the shard may already be that block); synthetic
      // buffers hold nothing to move.
      if (shard.bytes() > 0 && gathered.holds_values())
        std::memmove(static_cast<char*>(out) + shard.bytes() * static_cast<std::size_t>(rank()), in, shard.bytes());
      return start_ring(RingKind::all_gather, {shard, gathered}, out, gathered.numel(), gathered.dtype(), ReduceOp::sum,
                        {}, nullptr, 0);
    }
    // Communicator has checked that an overlapping shard is exactly this rank's slot.
    if (shard.bytes() > 0 && in == static_cast<char*>(out) + shard.bytes() * static_cast<std::size_t>(rank()))
      in = MPI_IN_PLACE;
    const int count = mpi_count(shard.numel());
    const MPI_Datatype type = types_.datatype(shard.dtype());
    auto pending = pending_op(CollectiveOp::all_gather, gathered.numel(), {shard, gathered});
    check_mpi(MPI_Iallgather(in, count, type, out, count, type, comm_, pending->request()),
              "MPI_Iallgather");
    return pending;
  }

  std::unique_ptr<PendingOp> start_reduce_scatter(const Tensor& full, Tensor& shard, ReduceOp op) override {
    const void* in = mpi_buffer(full);
    void* out = mpi_buffer(shard);
    if (ring_comm_ != MPI_COMM_NULL) {
      // Synthetic buffers hold nothing to keep: the ring runs on the input itself, no copy in or out.
      if (!full.holds_values())
        return start_ring(RingKind::reduce_scatter, {full, shard}, const_cast<void*>(in), full.numel(), full.dtype(),
                          op, {}, nullptr, 0, 0, false);
      const auto* first = static_cast<const unsigned char*>(in);
      return start_ring(RingKind::reduce_scatter, {full, shard}, nullptr, full.numel(), full.dtype(), op,
                        std::vector<unsigned char>(first, first + full.bytes()), out, shard.bytes());
    }
    const int count = mpi_count(shard.numel());
    auto pending = pending_op(CollectiveOp::reduce_scatter, full.numel(), {full, shard});
    check_mpi(MPI_Ireduce_scatter_block(in, out, count, types_.datatype(full.dtype()), types_.op(full.dtype(), op), comm_,
                                        pending->request()),
              "MPI_Ireduce_scatter_block");
    return pending;
  }

  std::unique_ptr<PendingOp> start_broadcast(Tensor& buffer, int root) override {
    void* data = mpi_buffer(buffer);
    if (ring_comm_ != MPI_COMM_NULL)
      return start_ring(RingKind::broadcast, {buffer}, data, buffer.numel(), buffer.dtype(), ReduceOp::sum, {}, nullptr,
                        0, root);
    auto pending = pending_op(CollectiveOp::broadcast, buffer.numel(), {buffer});
    check_mpi(MPI_Ibcast(data, mpi_count(buffer.numel()), types_.datatype(buffer.dtype()),
                         root, comm_, pending->request()),
              "MPI_Ibcast");
    return pending;
  }

  std::unique_ptr<PendingOp> start_reduce(const Tensor& in, Tensor& out, int root, ReduceOp op) override {
    const void* send = mpi_buffer(in);
    void* receive = nullptr;  // significant on the root only
    std::vector<Tensor> buffers{in};
    if (rank() == root) {
      receive = mpi_buffer(out);
      if (send == receive && in.bytes() > 0) send = MPI_IN_PLACE;
      buffers.push_back(out);
    }
    if (ring_comm_ != MPI_COMM_NULL) {
      const auto* first = static_cast<const unsigned char*>(send == MPI_IN_PLACE ? receive : send);
      if (!in.holds_values())
        return start_ring(RingKind::reduce, std::move(buffers), const_cast<unsigned char*>(first), in.numel(),
                          in.dtype(), op, {}, nullptr, 0, root, false);
      return start_ring(RingKind::reduce, std::move(buffers), nullptr, in.numel(), in.dtype(), op,
                        std::vector<unsigned char>(first, first + in.bytes()), receive,
                        rank() == root ? in.bytes() : 0, root);
    }
    auto pending = pending_op(CollectiveOp::reduce, in.numel(), std::move(buffers));
    check_mpi(MPI_Ireduce(send, receive, mpi_count(in.numel()), types_.datatype(in.dtype()),
                          types_.op(in.dtype(), op), root, comm_, pending->request()),
              "MPI_Ireduce");
    return pending;
  }

  std::unique_ptr<PendingOp> start_send(const Tensor& buffer, int peer, int tag) override {
    require_tag(tag, "send");
    const void* data = mpi_buffer(buffer);
    auto pending = pending_op(CollectiveOp::send, buffer.numel(), {buffer});
    check_mpi(MPI_Isend(data, mpi_count(buffer.numel()), types_.datatype(buffer.dtype()), peer,
                        tag, comm_, pending->request()),
              "MPI_Isend");
    return pending;
  }

  std::unique_ptr<PendingOp> start_recv(Tensor& buffer, int peer, int tag) override {
    require_tag(tag, "recv");
    void* data = mpi_buffer(buffer);
    const int count = mpi_count(buffer.numel());
    const MPI_Datatype type = types_.datatype(buffer.dtype());
    auto pending = pending_op(CollectiveOp::recv, buffer.numel(), {buffer});
    pending->expect_received(count, type, peer);
    check_mpi(MPI_Irecv(data, count, type, peer, tag, comm_, pending->request()), "MPI_Irecv");
    return pending;
  }

  std::unique_ptr<PendingOp> start_barrier() override {
    // With rings: an all-reduce ring of nothing, 2(n−1) empty messages; no rank leaves before every
    // rank has entered (its last block depends on all).  SMPI's MPI_Ibarrier is its slow path.
    if (ring_comm_ != MPI_COMM_NULL)
      return start_ring(RingKind::all_reduce, {}, nullptr, 0, DType::f32, ReduceOp::sum, {}, nullptr, 0);
    auto pending = pending_op(CollectiveOp::barrier, 0, {});
    check_mpi(MPI_Ibarrier(comm_, pending->request()), "MPI_Ibarrier");
    return pending;
  }

 private:
  // The SMPI build always runs rings and chains (docs/simulate.md); MDTP_COLLECTIVES=ring anywhere.
  static bool use_rings() {
    if (simulated_build()) return true;
    const char* chosen = std::getenv("MDTP_COLLECTIVES");
    if (chosen == nullptr || std::string_view(chosen).empty() || std::string_view(chosen) == "mpi") return false;
    require(std::string_view(chosen) == "ring", "MDTP_COLLECTIVES must be mpi or ring; got '", chosen, "'");
    return true;
  }

  // `work` null: the ring works on `scratch` (a reduce-scatter's copy of its input), whose block
  // `rank` goes to `shard_out` at completion.
  // `root`: of a broadcast or reduce; the reduction then goes to `shard_out` from offset 0.
  // `combine` false: synthetic buffers (RingCollective), the messages without the arithmetic.
  std::unique_ptr<PendingOp> start_ring(RingKind kind, std::vector<Tensor> buffers, void* work, std::int64_t count,
                                        DType dtype, ReduceOp op, std::vector<unsigned char> scratch, void* shard_out,
                                        std::size_t shard_bytes, int root = 0, bool combine = true) {
    auto pending = std::make_unique<RingPendingOp>(std::move(buffers), std::move(scratch), shard_out, shard_bytes);
    if (work == nullptr) work = pending->scratch().data();
    const int tag = static_cast<int>(ring_sequence_++ % (static_cast<std::uint64_t>(tag_ub_) + 1));
    pending->start(std::make_unique<RingCollective>(kind, ring_comm_, tag, types_.datatype(dtype), types_.op(dtype, op),
                                                    dtype_size(dtype), work, count, root, combine),
                   kind == RingKind::reduce ? 0 : static_cast<std::int64_t>(shard_bytes) * rank());
    return pending;
  }

  std::unique_ptr<MpiPendingOp> pending_op(CollectiveOp op, std::int64_t elements, std::vector<Tensor> buffers) const {
    return std::make_unique<MpiPendingOp>(policy_, std::move(buffers), name(), op, elements, ledger());
  }

  void require_tag(int tag, const char* op) const {
    require(tag <= tag_ub_, op, " on group '", name(), "': tag=", tag, " exceeds this MPI's MPI_TAG_UB of ",
            tag_ub_);
  }

  MPI_Comm comm_;
  MpiHalfTypes types_;  // bf16/f16 on the wire: 2 bytes, sums in f32 (mpi_half_types.hpp)
  WaitPolicy policy_;
  std::vector<int> world_ranks_;
  int tag_ub_ = 32767;  // the minimum the MPI standard guarantees
  MPI_Comm ring_comm_ = MPI_COMM_NULL;  // set when the ring collectives run (use_rings)
  std::uint64_t ring_sequence_ = 0;     // rings started on this group: each one's tag
};


}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(std::string name, MPI_Comm comm,
                                                    CommLedger* ledger, WaitPolicy policy) {
  require(comm != MPI_COMM_NULL, "make_mpi_communicator('", name,
          "') got MPI_COMM_NULL; a rank outside a group has no communicator for it");
  return std::make_unique<MpiCommunicator>(std::move(name), comm, ledger, policy);
}

}  // namespace mdtp
