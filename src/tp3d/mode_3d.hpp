#pragma once
// 3D tensor parallelism on a q×q×q cube, tp-rank t = i + q·j + q²·k (i: tp.input, j: tp.weight,
// k: tp.output).  For a Linear whose input X [B, K] has rows split over (tp.weight coarse,
// I fine) and columns over O — parity 0: I = tp.input, O = tp.output:
//
//   W [K, N]: rows over (O coarse, tp.weight fine), columns over I            shard [K/q², N/q]
//   forward:  all-gather X over I (dim 0)  → X(j, k) block [B/q, K/q]
//             all-gather W over tp.weight  → W(k, i) block [K/q, N/q]
//             GEMM, reduce-scatter Y over O (dim 0) → Y rows over (tp.weight, O), columns over I
//   backward: all-gather dY over O; dX = dY·Wᵀ reduce-scattered over I; dW = Xᵀ·dY
//             reduce-scattered over tp.weight (plus the all-gathers of X and W again when only
//             shards were kept: TpOptions::keep_gathered_3d).
//
// Y's hidden dimension lands on I, so the next Linear sees I and O swapped (parity 1); every 3D
// activation carries that parity in its Layout.  Bias gradients are summed over the
// tp.weight×O plane, LayerNorm parameter gradients over the tp.weight×I plane.
#include "tp/mode.hpp"

namespace mdtp {

class Mode3D final : public TensorParallelMode {
 public:
  using TensorParallelMode::TensorParallelMode;
  TpMode kind() const override { return TpMode::d3; }
  Layout residual_layout() const override { return activation_layout(0); }
  std::vector<std::string> tp_axes() const override { return {"tp.input", "tp.weight", "tp.output"}; }
  std::unique_ptr<Linear> linear(const LinearSpec& spec, const Layout& input) const override;

  // parity 0: rows (tp.weight, tp.input), columns tp.output; parity 1: input and output swapped.
  static Layout activation_layout(int parity);
};

}  // namespace mdtp
