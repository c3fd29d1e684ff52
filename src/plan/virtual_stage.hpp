#pragma once
// StageMap: which stage runs which virtual stage, for the three stage mappings of the run spec
// (spec/run_spec.hpp) — the one place that knows the arithmetic, shared by the schedules, the stage
// partition, the simulator, the executor and the cost model.
//
// A micro-batch runs along a *route* of virtual stages, each a *position* in the model (position
// 0 embeds, the last holds the head and computes the loss; the blocks are cut between
// positions in model order):
//   round-robin  one route of p·v positions; virtual stage c·p + r is chunk c of stage r
//                (Megatron's interleaving; v = 1 is the plain pipeline);
//   v-shape      one route of 2p positions over two chunks: chunk 0 of stage r is position r,
//                chunk 1 is 2p − 1 − r, so the model runs down the stages and back up (ZB-V,
//                DualPipeV): stage p − 1 hands its chunk 0's output to its own chunk 1, and stage 0
//                holds the first and the last position;
//   mirrored     two routes of p positions each (DualPipe): route 0 runs down, position r on stage
//                r; route 1 runs up, position r on stage p − 1 − r.  Stage r so holds positions r
//                and p − 1 − r — two copies of the model, each stage's position on its mirror
//                stage p − 1 − r too.  A stage's chunks are numbered in model order (chunk 0 the
//                lower position), so the route of chunk c on stage r is c, flipped on the upper
//                half of the stages (r ≥ p/2), and mirror stages hold the same chunks.  Virtual
//                stage = route·p + position.  Needs p even.
// Along a route the neighbours of virtual stage k are k − 1 and k + 1 under every mapping.
#include "spec/run_spec.hpp"

namespace mdtp {

class StageMap {
 public:
  // An mdtp::Error for a mapping that cannot hold the stages and chunks (a V or a mirror has
  // exactly two chunks; a mirror needs an even p).
  StageMap(StageMapping mapping, int stages, int chunks);

  StageMapping mapping() const { return mapping_; }
  int stages() const { return stages_; }
  int chunks() const { return chunks_; }
  int virtual_stages() const { return stages_ * chunks_; }
  // Positions of one route: the parts the model is cut into (p under a mirror, p·v otherwise).
  int positions() const { return mapping_ == StageMapping::mirrored ? stages_ : stages_ * chunks_; }

  int virtual_stage(int stage, int chunk) const;
  int stage_of(int virtual_stage) const;
  int chunk_of(int virtual_stage) const;
  int position(int virtual_stage) const;
  int route(int virtual_stage) const { return mapping_ == StageMapping::mirrored ? virtual_stage / stages_ : 0; }
  bool first(int virtual_stage) const { return position(virtual_stage) == 0; }  // embeds the tokens
  bool last(int virtual_stage) const { return position(virtual_stage) == positions() - 1; }  // the loss
  // +1 when the chunk's activations travel towards higher stages, −1 when back.
  int direction(int stage, int chunk) const;

 private:
  void check_stage(int stage) const;
  void check_virtual(int virtual_stage) const;
  StageMapping mapping_;
  int stages_, chunks_;
};

}  // namespace mdtp
