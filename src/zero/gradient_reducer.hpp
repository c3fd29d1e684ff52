#pragma once
// GradientReducer: the gradient half of ZeRO (docs/zero.md §5).  Each bucket's full gradient is
// reduce-scattered over its shard group (dp, or dp × depth for 2.5D weights) into this rank's shard, then the shard alone is all-reduced over the
// bucket's partial-sum groups (TP planes, the tied embedding's pair of stages) — the same sum as
// reducing the full tensor over those groups first, at 1/dp of the bytes.
//
// Stage 1 starts every reduce-scatter when the gradients are finished; stages 2–3 start a bucket's
// as soon as every unit writing into it reported grads_ready, so it overlaps the rest of the
// backward pass.  They wait for it, and free the full bucket, when the next unit that completes a
// bucket reports (or in finish): at most the buckets of the latest such unit are in flight, so
// full gradients do not pile up during backward.  Every call is tagged with the phase "grad-sync",
// whatever pass is running when it starts.
#include <vector>

#include "comm/communicator.hpp"
#include "zero/zero_buffers.hpp"

namespace mdtp {

class GradientReducer {
 public:
  GradientReducer(const ZeroLayout& layout, ZeroBuffers& buffers, const Mesh& mesh, const Backend& backend);
  // A new step: no bucket started, every writer outstanding.
  void begin_step();
  // A unit's gradients are complete: start each bucket whose writers are all done, then complete
  // the buckets started at the previous such call (stages 2–3).
  void unit_ready(int unit);
  // Starts the buckets not yet started, completes the rest in bucket order, then sums every shard
  // over its partial groups.
  void finish();
  // Buckets whose reduce-scatter has started this step (tests observe the overlap with it).
  std::size_t started() const { return started_count_; }

 private:
  void start(std::size_t b);
  // Waits for bucket b's reduce-scatter, puts the sum in its shard and (stages 2–3) frees the full
  // gradient.
  void complete(std::size_t b);
  const ZeroLayout& layout_;
  ZeroBuffers& buffers_;
  const Mesh& mesh_;
  const Backend& backend_;
  std::vector<std::vector<int>> outstanding_;  // per bucket, writers not yet ready
  std::vector<bool> started_, completed_;
  std::vector<std::size_t> in_flight_;  // started at the latest unit_ready that started any
  std::vector<CommHandle> handles_;
  std::vector<Tensor> targets_;  // where each reduce-scatter lands
  std::size_t started_count_ = 0;
};

}  // namespace mdtp
