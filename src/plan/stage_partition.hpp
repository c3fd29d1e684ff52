#pragma once
// StagePartition: which units of a GPT each pipeline stage holds — a pure function of the layer
// count, the pipeline size p, the chunks per stage v and an optional explicit split, shared by the
// pipeline engine, the trainer and the cost model.
//
// Units are numbered as the model numbers them: 0 the embedding, 1 … L the blocks, L + 1 the head
// (ln_f and the tied LM head).  The model is cut between blocks only, so what crosses a boundary is
// always the residual stream.  There are p·v virtual stages; virtual stage k = c·p + r is chunk c
// of stage r (round-robin: with 8 blocks, p = 2, v = 2, stage 0 holds blocks [0, 1] and [4, 5],
// stage 1 [2, 3] and [6, 7]).  The embedding joins virtual stage 0, the head the last one.
//
// Blocks per virtual stage: an even split (L divisible by p·v), or given explicitly (p·v entries
// summing to L; `--pp-layers 3,5,5,3`).  A middle virtual stage may not be empty (it would hold
// no unit); the first and last may hold no block (only the embedding or the head).
#include <string>
#include <vector>

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
  StagePartition(int n_layer, int stages, int chunks, std::vector<int> blocks_per_virtual_stage = {});

  int stages() const { return stages_; }
  int chunks() const { return chunks_; }
  int virtual_stages() const { return stages_ * chunks_; }
  int n_layer() const { return n_layer_; }
  const std::vector<int>& blocks() const { return blocks_; }
  int virtual_stage(int stage, int chunk) const { return chunk * stages_ + stage; }
  int stage_of(int virtual_stage) const { return virtual_stage % stages_; }
  int chunk_of(int virtual_stage) const { return virtual_stage / stages_; }

  UnitSpan units(int virtual_stage) const;
  // The units of stage r's chunks, in chunk order (= ascending units).
  std::vector<UnitSpan> stage_units(int stage) const;
  // "[0-2] [3-5] ..." for messages and tables.
  std::string describe() const;

 private:
  int n_layer_, stages_, chunks_;
  std::vector<int> blocks_;  // per virtual stage
  std::vector<int> first_block_;
};

// "3,5,5,3" → {3, 5, 5, 3}; an mdtp::Error naming the text otherwise.
std::vector<int> parse_layer_split(const std::string& text);

}  // namespace mdtp
