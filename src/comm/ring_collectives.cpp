#include "comm/ring_collectives.hpp"

#include <algorithm>

#include "comm/wait_policy.hpp"
#include "core/error.hpp"

namespace mdtp {

RingCollective::RingCollective(RingKind kind, MPI_Comm comm, int tag, MPI_Datatype type, MPI_Op op,
                               std::size_t element_bytes, void* work, std::int64_t count)
    : kind_(kind),
      comm_(comm),
      tag_(tag),
      type_(type),
      op_(op),
      element_bytes_(element_bytes),
      work_(static_cast<unsigned char*>(work)),
      count_(count) {
  check_mpi(MPI_Comm_rank(comm, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size_), "MPI_Comm_size");
  const int ring_steps = size_ - 1;
  steps_ = kind == RingKind::all_reduce ? 2 * ring_steps : ring_steps;
}

RingCollective::~RingCollective() {
  for (MPI_Request& r : requests_)
    if (r != MPI_REQUEST_NULL) MPI_Wait(&r, MPI_STATUS_IGNORE);
}

std::int64_t RingCollective::block_count(int block) const {
  return count_ / size_ + (block < count_ % size_ ? 1 : 0);
}

std::int64_t RingCollective::block_offset(int block) const {
  return static_cast<std::int64_t>(block) * (count_ / size_) + std::min<std::int64_t>(block, count_ % size_);
}

void RingCollective::start() {
  if (!done()) post_step();
}

// Step s of a reduce-scatter ring (s < n−1): send block (r−s−1) mod n to the right, receive block
// (r−s−2) mod n from the left and reduce this rank's values into it; after n−1 steps block r is
// complete here.  Step s of an all-gather ring: send block (r−s) mod n, receive block (r−s−1) mod n
// in place.  All-reduce: the reduce-scatter ring, then the all-gather ring.
void RingCollective::post_step() {
  const int n = size_, right = (rank_ + 1) % n, left = (rank_ + n - 1) % n;
  const bool reducing = kind_ == RingKind::reduce_scatter || (kind_ == RingKind::all_reduce && step_ < n - 1);
  const int s = kind_ == RingKind::all_reduce && !reducing ? step_ - (n - 1) : step_;
  int send_block = 0, recv_block = 0;
  if (reducing) {
    send_block = ((rank_ - s - 1) % n + n) % n;
    recv_block = ((rank_ - s - 2) % n + n) % n;
  } else {
    send_block = ((rank_ - s) % n + n) % n;
    recv_block = ((rank_ - s - 1) % n + n) % n;
  }
  const std::int64_t send_count = block_count(send_block), recv_count = block_count(recv_block);
  unsigned char* recv_to = work_ + block_offset(recv_block) * static_cast<std::int64_t>(element_bytes_);
  if (reducing) {
    incoming_.resize(static_cast<std::size_t>(recv_count) * element_bytes_);
    recv_to = incoming_.data();
  }
  check_mpi(MPI_Irecv(recv_to, static_cast<int>(recv_count), type_, left, tag_, comm_, &requests_[1]), "MPI_Irecv");
  check_mpi(MPI_Isend(work_ + block_offset(send_block) * static_cast<std::int64_t>(element_bytes_),
                      static_cast<int>(send_count), type_, right, tag_, comm_, &requests_[0]),
            "MPI_Isend");
}

void RingCollective::advance() {
  const int n = size_;
  const bool reducing = kind_ == RingKind::reduce_scatter || (kind_ == RingKind::all_reduce && step_ < n - 1);
  if (reducing) {
    const int recv_block = ((rank_ - step_ - 2) % n + n) % n;
    // work[block] = incoming op work[block]
    check_mpi(MPI_Reduce_local(incoming_.data(), work_ + block_offset(recv_block) * static_cast<std::int64_t>(element_bytes_),
                               static_cast<int>(block_count(recv_block)), type_, op_),
              "MPI_Reduce_local");
  }
  ++step_;
  if (!done()) post_step();
}

RingProgress& RingProgress::process() {
  static RingProgress progress;
  return progress;
}

void RingProgress::add(RingCollective* ring) { active_.push_back(ring); }

void RingProgress::remove(RingCollective* ring) {
  active_.erase(std::remove(active_.begin(), active_.end(), ring), active_.end());
}

void RingProgress::wait_for(RingCollective& ring) {
  std::vector<MPI_Request> requests;
  while (!ring.done()) {
    requests.clear();
    for (RingCollective* r : active_) requests.insert(requests.end(), r->requests(), r->requests() + 2);
    int index = MPI_UNDEFINED;
    check_mpi(MPI_Waitany(static_cast<int>(requests.size()), requests.data(), &index, MPI_STATUS_IGNORE),
              "MPI_Waitany");
    require(index != MPI_UNDEFINED, "ring collective: waiting with no message in flight");
    // Waitany freed the completed request in the copy: mirror it, then advance every ring whose
    // step has completed (both its requests done).  Advancing may post requests, or finish (and
    // its owner may then remove it), so walk a snapshot.
    RingCollective* owner = active_[static_cast<std::size_t>(index / 2)];
    owner->requests()[index % 2] = MPI_REQUEST_NULL;
    const std::vector<RingCollective*> snapshot = active_;
    for (RingCollective* r : snapshot) {
      MPI_Request* q = r->requests();
      if (!r->done() && q[0] == MPI_REQUEST_NULL && q[1] == MPI_REQUEST_NULL) r->advance();
    }
  }
}

bool RingProgress::test(RingCollective& ring) {
  const std::vector<RingCollective*> snapshot = active_;
  for (RingCollective* r : snapshot) {
    if (r->done()) continue;
    int complete = 0;
    check_mpi(MPI_Testall(2, r->requests(), &complete, MPI_STATUSES_IGNORE), "MPI_Testall");
    if (complete) r->advance();
  }
  return ring.done();
}

}  // namespace mdtp
