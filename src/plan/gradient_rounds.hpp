#pragma once
// GradientRounds: when ZeRO-2/3 start a reduce-scatter round of a bucket (docs/zero.md §3).  A
// bucket is written by one or more units (a tied wte by the head and the embedding); each unit
// reports — after its last weight pass of the step, or reducing per micro-batch after each one —
// and a new round of the bucket starts once every writer has reported one more time than the
// rounds so far.  One rule for the engine (zero/gradient_reducer.hpp, which reduces) and the model
// of the memory it holds (gradient_peak.hpp, which replays it).
#include <cstddef>
#include <vector>

namespace mdtp {

class GradientRounds {
 public:
  // `writers[b]`: the units whose passes add into bucket b.  No report counted, no round started.
  explicit GradientRounds(std::vector<std::vector<int>> writers);
  // Back to no report and no round (a new step).
  void reset();

  // Unit `unit` has reported: the buckets (ascending) whose next round starts now.
  std::vector<std::size_t> report(int unit);
  // Rounds of bucket b started so far (the one `report` just returned included).
  int rounds(std::size_t b) const { return rounds_.at(b); }
  std::size_t bucket_count() const { return writers_.size(); }
  // Whether unit `unit` writes into bucket b.
  bool writes(int unit, std::size_t b) const;

 private:
  std::vector<std::vector<int>> writers_;
  std::vector<std::vector<int>> reports_;  // per bucket, per writer (writers_ order)
  std::vector<int> rounds_;
};

}  // namespace mdtp
