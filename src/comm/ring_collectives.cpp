#include "comm/ring_collectives.hpp"

#include <algorithm>
#include <cmath>

#include "comm/wait_policy.hpp"
#include "core/error.hpp"

namespace mdtp {

std::int64_t chain_chunks(int n, std::int64_t bytes) {
  if (n <= 2 || bytes <= 0) return 1;
  constexpr double kAlphaOverBeta = 1024.0 * 1024.0;
  const auto k = static_cast<std::int64_t>(std::llround(std::sqrt((n - 2.0) * static_cast<double>(bytes) / kAlphaOverBeta)));
  return std::max<std::int64_t>(1, k);
}

RingCollective::RingCollective(RingKind kind, MPI_Comm comm, int tag, MPI_Datatype type, MPI_Op op,
                               std::size_t element_bytes, void* work, std::int64_t count, int root, bool combine)
    : kind_(kind),
      comm_(comm),
      tag_(tag),
      root_(root),
      type_(type),
      op_(op),
      element_bytes_(element_bytes),
      work_(static_cast<unsigned char*>(work)),
      count_(count),
      combine_(combine) {
  check_mpi(MPI_Comm_rank(comm, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size_), "MPI_Comm_size");
  if (is_chain()) {
    // The root and the far end take k steps (send only, receive only); the ranks between take
    // k + 1 (receive chunk j while sending chunk j − 1).
    parts_ = chain_chunks(size_, count_ * static_cast<std::int64_t>(element_bytes_));
    const int position = (rank_ - root_ + size_) % size_;
    const bool middle = position != 0 && position != size_ - 1;
    steps_ = size_ == 1 ? 0 : static_cast<int>(parts_) + (middle ? 1 : 0);
  } else {
    parts_ = size_;
    const int ring_steps = size_ - 1;
    steps_ = kind == RingKind::all_reduce ? 2 * ring_steps : ring_steps;
  }
}

RingCollective::~RingCollective() {
  for (MPI_Request& r : requests_)
    if (r != MPI_REQUEST_NULL) MPI_Wait(&r, MPI_STATUS_IGNORE);
}

std::int64_t RingCollective::part_count(std::int64_t part) const {
  return count_ / parts_ + (part < count_ % parts_ ? 1 : 0);
}

std::int64_t RingCollective::part_offset(std::int64_t part) const {
  return part * (count_ / parts_) + std::min<std::int64_t>(part, count_ % parts_);
}

unsigned char* RingCollective::part_data(std::int64_t part) const {
  return work_ + part_offset(part) * static_cast<std::int64_t>(element_bytes_);
}

void RingCollective::start() {
  if (!done()) post_step();
}

// Step s of a reduce-scatter ring (s < n−1): send block (r−s−1) mod n to the right, receive block
// (r−s−2) mod n from the left and reduce this rank's values into it; after n−1 steps block r is
// complete here.  Step s of an all-gather ring: send block (r−s) mod n, receive block (r−s−1) mod n
// in place.  All-reduce: the reduce-scatter ring, then the all-gather ring.
RingCollective::Step RingCollective::ring_step() const {
  const int n = size_;
  const bool reducing = kind_ == RingKind::reduce_scatter || (kind_ == RingKind::all_reduce && step_ < n - 1);
  const int s = kind_ == RingKind::all_reduce && !reducing ? step_ - (n - 1) : step_;
  Step step;
  step.to = (rank_ + 1) % n;
  step.from = (rank_ + n - 1) % n;
  step.reduce_received = reducing;
  step.send = reducing ? ((rank_ - s - 1) % n + n) % n : ((rank_ - s) % n + n) % n;
  step.receive = reducing ? ((rank_ - s - 2) % n + n) % n : ((rank_ - s - 1) % n + n) % n;
  return step;
}

// A chain along the ring: broadcast runs from the root (position 0) towards position n−1, reduce
// from position n−1 towards the root.  At step j a rank receives chunk j (if it is not the
// chain's source) and sends chunk j−1 on (the source sends chunk j, having it from the start).
RingCollective::Step RingCollective::chain_step() const {
  const int n = size_, position = (rank_ - root_ + n) % n;
  const bool broadcast = kind_ == RingKind::broadcast;
  const bool source = broadcast ? position == 0 : position == n - 1;
  const bool sink = broadcast ? position == n - 1 : position == 0;
  Step step;
  step.from = broadcast ? (rank_ + n - 1) % n : (rank_ + 1) % n;
  step.to = broadcast ? (rank_ + 1) % n : (rank_ + n - 1) % n;
  step.reduce_received = !broadcast;
  const std::int64_t j = step_;
  if (!source && j < parts_) step.receive = j;
  if (!sink) {
    const std::int64_t sent = source ? j : j - 1;
    if (sent >= 0 && sent < parts_) step.send = sent;
  }
  return step;
}

RingCollective::Step RingCollective::current_step() const { return is_chain() ? chain_step() : ring_step(); }

void RingCollective::post_step() {
  const Step step = current_step();
  if (step.receive >= 0) {
    const std::int64_t recv_count = part_count(step.receive);
    unsigned char* recv_to = part_data(step.receive);
    if (step.reduce_received && combine_) {
      incoming_.resize(static_cast<std::size_t>(recv_count) * element_bytes_);
      recv_to = incoming_.data();
    }
    check_mpi(MPI_Irecv(recv_to, static_cast<int>(recv_count), type_, step.from, tag_, comm_, &requests_[1]),
              "MPI_Irecv");
  }
  if (step.send >= 0)
    check_mpi(MPI_Isend(part_data(step.send), static_cast<int>(part_count(step.send)), type_, step.to, tag_, comm_,
                        &requests_[0]),
              "MPI_Isend");
}

void RingCollective::advance() {
  const Step step = current_step();
  if (step.receive >= 0 && step.reduce_received && combine_) {
    // work[part] = incoming op work[part]
    check_mpi(MPI_Reduce_local(incoming_.data(), part_data(step.receive), static_cast<int>(part_count(step.receive)),
                               type_, op_),
              "MPI_Reduce_local");
  }
  ++step_;
  if (!done()) post_step();
}

RingProgress& RingProgress::process() {
#ifdef MDTP_SMPI
  // Every simulated rank lives in this one process, and `mdtp simulate` shares the program's
  // globals between them (smpi/privatization:no, docs/simulate.md): the rank's own rings hang on
  // SMPI's per-rank slot, created on first use and kept until the simulation ends.
  auto* progress = static_cast<RingProgress*>(smpi_process_get_user_data());
  if (progress == nullptr) {
    progress = new RingProgress;
    smpi_process_set_user_data(progress);
  }
  return *progress;
#else
  static RingProgress progress;
  return progress;
#endif
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
