#pragma once
// StagePartition: which units of a GPT each pipeline stage holds — a pure function of the layer
// count, the pipeline size p, the chunks per stage v and an optional explicit split, shared by the
// pipeline engine, the trainer and the cost model.
//
// Units are numbered as the model numbers them: 0 the embedding, 1 … L the blocks, L + 1 the head
// (ln_f and the tied LM head).  The model is cut between blocks only, so what crosses a boundary is
// always the residual stream.  The model is cut into positions, in model order, and the stage
// mapping (plan/virtual_stage.hpp) says which stage runs which: round-robin, p·v positions,
// virtual stage k = c·p + r chunk c of stage r (with 8 blocks, p = 2, v = 2, stage 0 holds blocks
// [0, 1] and [4, 5], stage 1 [2, 3] and [6, 7]); V-shaped, 2p positions, stage r holding r and
// 2p − 1 − r (with 8 blocks and p = 2, stage 0 holds [0, 1] and [6, 7], stage 1 [2, 3] and
// [4, 5]); mirrored, p positions, stage r holding r and p − 1 − r (with 8 blocks and p = 4, stage
// 0 holds [0, 1] and [6, 7], stage 1 [2, 3] and [4, 5], and stages 2 and 3 the same again: two
// copies).  The embedding joins position 0, the head the last one.
//
// Blocks per position: an even split (L divisible by the positions), or given explicitly (one entry
// per position in model order, summing to L; `--pp-layers 3,5,5,3`).  A middle position may not be
// empty (it would hold no unit); the first and last may hold no block (only the embedding or the
// head).
#include <string>
#include <vector>

#include "plan/virtual_stage.hpp"

namespace mdtp {

// Global unit indices [first, last], inclusive.
struct UnitSpan {
  int first = 0, last = 0;
  bool operator==(const UnitSpan&) const = default;
};

class StagePartition {
 public:
  // An mdtp::Error naming the value for anything that does not split (refused on every rank alike:
  // it is pure).
  StagePartition(int n_layer, int stages, int chunks, std::vector<int> blocks_per_virtual_stage = {},
                 StageMapping mapping = StageMapping::round_robin);

  int stages() const { return map_.stages(); }
  int chunks() const { return map_.chunks(); }
  int virtual_stages() const { return map_.virtual_stages(); }
  int positions() const { return map_.positions(); }
  int n_layer() const { return n_layer_; }
  const std::vector<int>& blocks() const { return blocks_; }  // per position
  StageMapping mapping() const { return map_.mapping(); }
  const StageMap& map() const { return map_; }
  int virtual_stage(int stage, int chunk) const { return map_.virtual_stage(stage, chunk); }
  int stage_of(int virtual_stage) const { return map_.stage_of(virtual_stage); }
  int chunk_of(int virtual_stage) const { return map_.chunk_of(virtual_stage); }

  // The units a virtual stage runs: those of its position.
  UnitSpan units(int virtual_stage) const;
  // The units of stage r's chunks, in chunk order (= ascending units under either mapping).
  std::vector<UnitSpan> stage_units(int stage) const;
  // "[0-2] [3-5] ..." for messages and tables.
  std::string describe() const;

 private:
  UnitSpan position_units(int position) const;

  int n_layer_;
  StageMap map_;
  std::vector<int> blocks_;  // per position
  std::vector<int> first_block_;
};

// A run's partition as its spec sets it: the model's layers over pp × chunks, the run's own split
// (layout.pp_layers) and its stage mapping. The trainer, the byte plan and the step model all build
// it here, so none can leave out a field of the layout.
StagePartition stage_partition(const RunSpec& spec);

// "3,5,5,3" → {3, 5, 5, 3}; an mdtp::Error naming the text otherwise.
std::vector<int> parse_layer_split(const std::string& text);

}  // namespace mdtp
