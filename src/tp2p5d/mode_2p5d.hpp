#pragma once
// 2.5D tensor parallelism (Tesseract): d·q² ranks, tp-rank t = c + q·r + q²·k (k = depth).
// Each depth slab k is a q×q SUMMA grid (tp.row, tp.col inside the slab); X is split into d·q
// row blocks (block k·q + r, so depth is the coarse split) × q column blocks; W is split q×q and
// replicated over depth, its gradient summed over tp.dep; bias and LayerNorm parameters are
// replicated over the col×dep plane (tp.col-dep), where their gradients are summed.
// 2.5D(q, d) computes exactly what 2D(q) with d-way data parallelism over the depth computes.
//
//   depth k=0        depth k=1
//   [0 1]            [4 5]        t = c + 2r + 4k  (q = 2, d = 2)
//   [2 3]            [6 7]        tp.dep: {0,4} {1,5} {2,6} {3,7}
#include "tp/mode.hpp"

namespace mdtp {

class Mode2p5D final : public TensorParallelMode {
 public:
  using TensorParallelMode::TensorParallelMode;
  TpMode kind() const override { return TpMode::d2p5; }
  Layout residual_layout() const override { return activation_layout(); }
  std::vector<std::string> tp_axes() const override { return {"tp.row", "tp.col", "tp.dep"}; }
  std::unique_ptr<Linear> linear(const LinearSpec& spec, const Layout& input) const override;

  static Layout activation_layout() { return Layout{"2.5d", {"tp.dep", "tp.col"}, {"tp.row"}}; }
  static Layout weight_layout() { return Layout{"2.5d.weight", {"tp.col"}, {"tp.row"}}; }
};

}  // namespace mdtp
