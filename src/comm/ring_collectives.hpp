#pragma once
// NCCL's ring algorithms over MPI point-to-point, for the collectives whose algorithm the cost
// model must know exactly: all-reduce (a ring reduce-scatter, then a ring all-gather: 2(n−1) steps
// of S/n bytes), all-gather and reduce-scatter (n−1 steps of S/n bytes), and broadcast and reduce
// as NCCL runs them: a pipelined chain along the ring from (or to) the root, the message cut in
// k chunks (chain_chunks), n−2+k steps of S/k bytes.
//
// Why: under SimGrid's SMPI (docs/simulate.md) the non-blocking collectives ignore SMPI's algorithm
// selectors, so a simulated time would belong to an algorithm nobody runs; with these rings the
// simulated run moves exactly the messages the analytic model counts (cost/time_model.hpp, ring).
// The SMPI build uses them; MDTP_COLLECTIVES=ring selects them on any MPI (tests compare them with
// the MPI library's collectives there).
//
// Progress: a ring advances one step at a time, when its step's send and receive have completed.
// Nothing runs in the background, so every wait drives every ring in flight on this rank, on any
// communicator (RingProgress): a rank waiting for its tensor-parallel all-reduce still forwards
// the data-parallel ring its peers wait on, as MPI's own progress engine would.
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace mdtp {

enum class RingKind { all_reduce, all_gather, reduce_scatter, broadcast, reduce };

// Chunks of a pipelined chain of n ranks carrying `bytes`: k = round(sqrt((n−2)·bytes / 1 MiB)),
// at least 1, and 1 for n ≤ 2 (one hop has nothing to overlap).  Why: the chain takes
// (n−2+k)·(α + S/k·β), least at k = sqrt((n−2)·S·β/α); 1 MiB is α/β of an NVLink route
// (3 µs at ~360 GB/s, the DGX presets), so the rule is the optimum there and near it elsewhere.
std::int64_t chain_chunks(int n, std::int64_t bytes);

// One ring collective on `comm` (a communicator used for ring traffic only) with tag `tag`.
//   all_reduce:     `work` holds `count` elements, reduced in place.
//   all_gather:     `work` holds size blocks of count/size elements; this rank's block is in place.
//   reduce_scatter: `work` holds size blocks (a scratch copy of the input, overwritten); the
//                   reduced block of this rank ends in block `rank` of `work`.
//   broadcast:      `work` holds `count` elements, the root's sent, the others' overwritten.
//   reduce:         `work` holds `count` elements (a scratch copy of the input, overwritten); the
//                   reduction ends in `work` on the root.
// Blocks and chunks are as even as the count allows (the first ones one element longer).
// `combine` false: the buffers hold no values (synthetic tensors, simulate/synthetic_allocator.hpp),
// so a received part lands in place and nothing is reduced — the same messages, no arithmetic.
class RingCollective {
 public:
  RingCollective(RingKind kind, MPI_Comm comm, int tag, MPI_Datatype type, MPI_Op op, std::size_t element_bytes,
                 void* work, std::int64_t count, int root = 0, bool combine = true);
  RingCollective(const RingCollective&) = delete;
  RingCollective& operator=(const RingCollective&) = delete;
  ~RingCollective();

  bool done() const { return step_ >= steps_; }
  // Posts the first step (or completes at once on one rank).
  void start();
  // The current step's send and receive.
  MPI_Request* requests() { return requests_; }
  // Both requests of the current step have completed: reduce what arrived, post the next step.
  void advance();

 private:
  // What one step moves: a part (block or chunk) to send and one to receive, or none (-1).
  struct Step {
    std::int64_t send = -1, receive = -1;
    int to = 0, from = 0;
    bool reduce_received = false;  // combine the received part into `work`, rather than store it
  };
  Step ring_step() const;
  Step chain_step() const;
  Step current_step() const;
  bool is_chain() const { return kind_ == RingKind::broadcast || kind_ == RingKind::reduce; }
  std::int64_t part_offset(std::int64_t part) const;
  std::int64_t part_count(std::int64_t part) const;
  unsigned char* part_data(std::int64_t part) const;  // where the part starts in `work`
  void post_step();

  RingKind kind_;
  MPI_Comm comm_;
  int tag_, rank_ = 0, size_ = 1, root_ = 0;
  std::int64_t parts_ = 1;  // ring: blocks (= size); chain: chunks
  MPI_Datatype type_;
  MPI_Op op_;
  std::size_t element_bytes_;
  unsigned char* work_;
  std::int64_t count_;
  bool combine_;
  int step_ = 0, steps_ = 0;
  std::vector<unsigned char> incoming_;  // a received block before it is reduced in
  MPI_Request requests_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
};

// The rings in flight on this rank; waits drive all of them.  One per process, and one per
// simulated rank under SMPI (all ranks in one process: ring_collectives.cpp says how).
class RingProgress {
 public:
  static RingProgress& process();
  void add(RingCollective* ring);
  void remove(RingCollective* ring);
  // Blocks (MPI_Waitany) until `ring` is done, advancing every ring in flight meanwhile.
  void wait_for(RingCollective& ring);
  // Advances whatever has arrived without blocking; true when `ring` is done.
  bool test(RingCollective& ring);

 private:
  std::vector<RingCollective*> active_;
};

}  // namespace mdtp
