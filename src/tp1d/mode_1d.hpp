#pragma once
// 1D tensor parallelism (Megatron-LM), P ranks in the "tp" group.
//
//   column-parallel  X [B,K] replicated  ·  W [K, N/P]  →  Y [B, N/P]      ("f": identity fwd,
//                                                                           all-reduce dX bwd)
//   row-parallel     X [B,K/P]           ·  W [K/P, N]  →  all-reduce Y [B,N]   ("g": all-reduce
//                                                                           fwd, identity bwd)
// so a column → row pair (the MLP, attention) costs one all-reduce forward and one backward.
//
// 1d-sp (Megatron sequence parallelism): outside the pair, activations are split by rows
// [B/P, H]; the column layer all-gathers X (and again in backward, keeping only the shard, as
// Megatron does) and reduce-scatters dX; the row layer reduce-scatters Y and all-gathers dY.
// LayerNorm then runs on row shards, its γ/β gradients partial over tp.
//
// Layouts: "1d.full" (replicated), "1d.hidden" (columns over tp), "1d-sp.seq" (rows over tp).
#include "tp/mode.hpp"

namespace mdtp {

class Mode1D final : public TensorParallelMode {
 public:
  Mode1D(const TpContext& ctx, bool sequence_parallel)
      : TensorParallelMode(ctx), sequence_parallel_(sequence_parallel) {}
  TpMode kind() const override { return sequence_parallel_ ? TpMode::d1_sp : TpMode::d1; }
  Layout residual_layout() const override { return sequence_parallel_ ? seq_layout() : full_layout(); }
  std::vector<std::string> tp_axes() const override { return {"tp"}; }
  std::unique_ptr<Linear> linear(const LinearSpec& spec, const Layout& input) const override;

  static Layout full_layout() { return Layout{"1d.full", {}, {}}; }
  static Layout hidden_layout() { return Layout{"1d.hidden", {}, {"tp"}}; }
  static Layout seq_layout() { return Layout{"1d-sp.seq", {"tp"}, {}}; }

 private:
  bool sequence_parallel_;
};

}  // namespace mdtp
