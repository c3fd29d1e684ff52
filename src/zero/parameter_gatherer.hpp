#pragma once
// ParameterGatherer: ZeRO-3's parameters (docs/zero.md §7).  Between uses a rank holds only its
// shard of each bucket.  Before a unit's forward and before its backward-input pass the engine
// acquires the unit's buckets (all-gathered over each bucket's shard group, the parameters bound to the full buffer) and
// releases them after; a bucket is freed when no running unit uses it and no prefetch is waiting
// on it.  While a unit runs, the engine prefetches what the next pass of the stage's pass order
// reads: its all-gathers are started without waiting.  With keep_for_step, nothing is freed
// before release_all(), so each bucket is gathered once per step.  Every all-gather is tagged
// with the phase "param-gather".
#include <vector>

#include "comm/communicator.hpp"
#include "zero/zero_buffers.hpp"

namespace mdtp {

class ParameterGatherer {
 public:
  ParameterGatherer(const ZeroLayout& layout, ZeroBuffers& buffers, const Mesh& mesh, const Backend& backend,
                    bool keep_for_step);
  ~ParameterGatherer();
  // Gathers (or waits for the prefetch of) every bucket in `buckets` and binds it.
  void acquire(const std::vector<std::size_t>& buckets);
  // One use of each bucket in `buckets` ended: frees those nobody uses (unless kept).
  void release(const std::vector<std::size_t>& buckets);
  // Starts the gathers of `buckets` that are not materialised, without waiting.
  void prefetch(const std::vector<std::size_t>& buckets);
  // Waits for any prefetch in flight and frees every gathered bucket (the end of a step's passes;
  // the optimizer then updates the shards).
  void release_all();

 private:
  void start(std::size_t b);
  void complete(std::size_t b);
  void free_if_unused(std::size_t b);
  const ZeroLayout& layout_;
  ZeroBuffers& buffers_;
  const Mesh& mesh_;
  const Backend& backend_;
  bool keep_;
  std::vector<int> users_;         // passes running that read the bucket
  std::vector<bool> prefetched_;   // gathered (or gathering) for a unit that has not started yet
  std::vector<CommHandle> pending_;
  std::vector<Tensor> incoming_;   // the full buffer a pending gather writes
};

}  // namespace mdtp
