#pragma once
// BoundaryLink: the residual stream crossing a stage boundary, forward (activations) and backward
// (their gradients), between ranks with the same tensor-parallel and data-parallel coordinates
// (the members of one `pp` group), as non-blocking point-to-point calls in the ledger's phase
// "pipeline".
//
// The stream is this rank's shard of [b·T, H] in the mode's residual layout, so its shape is known
// in advance on both sides (no shape exchange).  Where that layout leaves the tensor replicated
// over a TP group R (1D without sequence parallelism: every tp rank holds all of it), each rank
// sends only its 1/|R| of the rows and the receiving stage all-gathers them over R — Megatron's
// scatter/gather optimisation: |R|× fewer bytes between stages for one all-gather inside a stage.
#include <string>

#include "comm/communicator.hpp"
#include "model/gpt.hpp"

namespace mdtp {

class BoundaryLink {
 public:
  // Every rank of the mesh builds it alike (a pure function of the model's mode and sizes).
  BoundaryLink(const GptModel& model, const Mesh& mesh);

  // A transfer in flight: the buffer lives until the handle completes.
  struct Transfer {
    Tensor buffer;
    CommHandle handle;
  };
  // Sends x (the residual shard, or its gradient) to pp-group rank `peer`.
  Transfer send(const Tensor& x, int peer, int tag) const;
  // Posts the receive of one residual shard from `peer`.
  Transfer post_receive(int peer, int tag) const;
  // Waits for a posted receive and returns the residual shard (all-gathered over R when only a
  // slice crossed the boundary).
  Tensor complete(Transfer& receive) const;

  // The group the stream is replicated over ("" when none) and its size.
  const std::string& replication_group() const { return replicated_over_; }
  int slices() const { return slices_; }
  // Elements of one shard, and of what crosses the boundary per rank.
  std::int64_t shard_elements() const { return rows_ * cols_; }
  std::int64_t wire_elements() const { return rows_ / slices_ * cols_; }

 private:
  const Mesh& mesh_;
  const Backend& backend_;
  DType dtype_;
  std::int64_t rows_ = 0, cols_ = 0;  // of this rank's residual shard
  std::string replicated_over_;
  int slices_ = 1, slice_ = 0;        // |R| and this rank's index in R
};

}  // namespace mdtp
