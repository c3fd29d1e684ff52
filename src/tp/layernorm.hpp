#pragma once
// LayerNorm over the hidden dimension of an activation in any layout — one implementation for
// every mode, because the layout says where the hidden split is:
//  - forward: local per-row (mean, M2) over this rank's columns, ONE all-gather of those [rows, 2]
//    statistics over the hidden group, then Chan's merge locally (stable: no E[x²]−E[x]²);
//  - backward: local per-row (Σ dy·γ, Σ dy·γ·x̂), ONE all-reduce over the hidden group.
// γ and β are sharded like the hidden dimension and replicated over the other TP axes; their
// gradients are partial over the groups that split the rows (2D: tp.col, 2.5D: tp.col-dep,
// 3D: the input×weight or output×weight plane, 1D-SP: tp).
#include <string>
#include <vector>

#include "tp/context.hpp"
#include "tp/parameter.hpp"

namespace mdtp {

// What one LayerNorm keeps for one micro-batch: x̂ and the per-row (mean, 1/σ) in float64.
struct LayerNormSaved {
  Tensor xhat, mean_rstd;
};

class LayerNorm {
 public:
  LayerNorm(const TpContext& ctx, std::string name, std::int64_t hidden, Layout layout,
            const std::vector<std::string>& tp_axes, double eps = 1e-5);
  // Fills `saved` (which must be empty).
  Tensor forward(const Tensor& x, LayerNormSaved& saved);
  // B: dX with its one all-reduce, and γ/β's gradients with it (they are row sums of dy·x̂ and
  // dy that the same kernel forms; cheap and needing no communication, they gain nothing from
  // being deferred).  Empties `saved`.
  Tensor backward_input(const Tensor& dy, LayerNormSaved& saved);
  // W: nothing left to do (see backward_input); kept so that every layer has both passes.
  void backward_weight(LayerNormSaved&) {}
  Tensor backward(const Tensor& dy, LayerNormSaved& saved) { return backward_input(dy, saved); }
  std::vector<Parameter*> parameters() { return {&gamma_, &beta_}; }
  const Layout& layout() const { return layout_; }

 private:
  TpContext ctx_;
  std::string name_;
  std::int64_t hidden_;
  Layout layout_;
  std::string hidden_group_;  // "" when the hidden dimension is not split
  double eps_;
  Parameter gamma_, beta_;
};

}  // namespace mdtp
