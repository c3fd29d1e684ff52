#pragma once
// LayerNorm (or RMSNorm) over the hidden dimension of an activation in any layout — one
// implementation for every mode, because the layout says where the hidden split is:
//  - forward: local per-row (mean, M2) over this rank's columns, ONE all-gather of those [rows, 2]
//    statistics over the hidden group, then Chan's merge locally (stable: no E[x²]−E[x]²);
//  - backward: local per-row (Σ dy·γ, Σ dy·γ·x̂), ONE all-reduce over the hidden group.
// γ and β are sharded like the hidden dimension and replicated over the other TP axes; their
// gradients are partial over the groups that split the rows (2D: tp.col, 2.5D: tp.col-dep,
// 3D: the input×weight or output×weight plane, 1D-SP: tp).
//
// RMSNorm (Llama: y = γ·x/sqrt(mean(x²) + ε), no β) runs the same path, uncentred: the merge turns
// the gathered (mean, M2) into 1/sqrt(mean² + M2/n + ε) with a zero mean, and the backward sums
// drop Σ dy·γ (Backend::merge_row_stats, layernorm_backward_sums).  So its collectives are
// LayerNorm's, byte for byte; it has γ only (β is a constant zero that is no parameter).
#include <string>
#include <vector>

#include "tp/context.hpp"
#include "tp/parameter.hpp"

namespace mdtp {

// What one LayerNorm keeps for one micro-batch: x̂ and the per-row (mean, 1/σ) in float64
// (RMSNorm: (0, 1/rms)).
struct LayerNormSaved {
  Tensor xhat, mean_rstd;
};

class LayerNorm {
 public:
  enum class Kind { layer, rms };
  LayerNorm(const TpContext& ctx, std::string name, std::int64_t hidden, Layout layout,
            const std::vector<std::string>& tp_axes, double eps = 1e-5, Kind kind = Kind::layer);
  // Fills `saved` (which must be empty).
  Tensor forward(const Tensor& x, LayerNormSaved& saved);
  // B: dX with its one all-reduce, and γ/β's gradients with it (they are row sums of dy·x̂ and
  // dy that the same kernel forms; cheap and needing no communication, they gain nothing from
  // being deferred).  Empties `saved`.
  Tensor backward_input(const Tensor& dy, LayerNormSaved& saved);
  // W: nothing left to do (see backward_input); kept so that every layer has both passes.
  void backward_weight(LayerNormSaved&) {}
  Tensor backward(const Tensor& dy, LayerNormSaved& saved) { return backward_input(dy, saved); }
  // γ and β (LayerNorm) or γ (RMSNorm).
  std::vector<Parameter*> parameters();
  Kind kind() const { return kind_; }
  const Layout& layout() const { return layout_; }

 private:
  TpContext ctx_;
  std::string name_;
  std::int64_t hidden_;
  Layout layout_;
  std::string hidden_group_;  // "" when the hidden dimension is not split
  double eps_;
  Kind kind_;
  Parameter gamma_, beta_;  // RMSNorm: beta_ is a constant zero, not a parameter
};

}  // namespace mdtp
