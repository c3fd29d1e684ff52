#pragma once
// GradientReducer: the gradient half of ZeRO (docs/zero.md §5).  Each bucket's full gradient is
// reduce-scattered over its shard group (dp, or dp × depth for 2.5D weights) into this rank's
// shard, then the shard alone is all-reduced over the bucket's partial-sum groups (TP planes, the
// tied embedding's pair of stages) — the same sum as reducing the full tensor over those groups
// first, at 1/dp of the bytes.
//
// Stage 1 starts every reduce-scatter when the gradients are finished.  Stages 2–3 reduce a bucket
// in rounds: a round starts as soon as every unit writing into the bucket has reported once more
// (unit_ready; the rule is plan/gradient_rounds.hpp's), so it overlaps the rest of the backward
// pass.  The engine decides when a unit
// reports: by default after its last weight pass of the step, so there is one round per step and
// the full bucket accumulates every micro-batch first; reducing per micro-batch (DeepSpeed's
// stage 2, ZeroConfig::reduce_per_micro_batch) after each of its weight passes: one round per
// micro-batch, m× the reduce-scatter traffic, and the shard sums the rounds.  Starting a round
// detaches the full buffer from the parameters (a later pass opens a fresh one); the round is
// waited for, and its buffer freed, when the next unit that starts a round reports, or a pass is
// about to reopen one of their buckets, or in finish: at most the rounds of the latest such unit
// are in flight, at points that are the same in every run, so the model predicts the memory
// (plan/gradient_peak.hpp).  Every call is tagged with the phase phase::grad_sync, whatever pass is
// running when it starts.
#include <vector>

#include "comm/communicator.hpp"
#include "plan/gradient_rounds.hpp"
#include "zero/zero_buffers.hpp"

namespace mdtp {

class GradientReducer {
 public:
  GradientReducer(const ZeroLayout& layout, ZeroBuffers& buffers, const Mesh& mesh, const Backend& backend);
  // A new step: no round started, no report counted.
  void begin_step();
  // Unit `unit` has reported (see above): start a round of each bucket whose writers have all
  // reported once more, then complete the rounds started at the previous such call (stages 2–3).
  void unit_ready(int unit);
  // Before a pass opens `buckets` (ZeroLayout::writes): if one of them is still being reduced from an
  // earlier round, complete the rounds in flight first, so its buffer is freed before a fresh one
  // is allocated (reducing per micro-batch, the tied wte's last round of one micro-batch would
  // otherwise meet the next micro-batch's head: two wte buffers).  The round has had the next
  // micro-batch's forward pass to arrive.
  void before_open(const std::vector<std::size_t>& buckets);
  // Starts a round of every bucket that has had none, completes the rest in start order, then
  // sums every shard over its partial groups.
  void finish();
  // Reduce-scatter rounds started this step, over all buckets (tests observe the overlap).
  std::size_t started() const { return started_count_; }

 private:
  // One round of one bucket: the full buffer it reduces, where the sum lands, and whether it is
  // added into the shard (every round after the first) or is the shard.
  struct Round {
    std::size_t bucket = 0;
    Tensor full, target;
    bool accumulate = false;
    CommHandle handle;
  };
  void start(std::size_t b, std::vector<Round>& into);
  // Waits for a round, puts its sum into the shard and (stages 2–3) frees its full buffer.
  void complete(Round& round);
  const ZeroLayout& layout_;
  ZeroBuffers& buffers_;
  const Mesh& mesh_;
  const Backend& backend_;
  GradientRounds rounds_;          // this step's reports and rounds
  std::vector<Round> in_flight_;  // started at the latest unit_ready that started any
  std::size_t started_count_ = 0;
};

}  // namespace mdtp
