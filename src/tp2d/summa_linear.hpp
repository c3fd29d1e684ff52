#pragma once
// SummaLinear: Y = X·W + b with X, W and Y each split q×q over (tp.col rows, tp.row columns) —
// the 2D (Optimus) Linear, and the 2.5D (Tesseract) one, which is the same algorithm run inside
// each depth slab on that slab's rows of X, with W replicated over tp.dep.
//
//   forward   Y  = summa_nn(X, W)          backward  dX  = summa_nt(dY, W)
//                                                    dW += summa_tn_accumulate(X, dY)
// (collective lists in tp2d/summa.hpp): dX is the backward-input pass (B), dW the weight pass (W).
// dW is left partial over `weight_partial_over` (2.5D: tp.dep, each slab having seen only its rows
// of the batch); reduce_gradients sums it later, so that it can be fused with the data-parallel
// reduction.  Kept per micro-batch (LinearSaved): this rank's X shard from forward, its dY shard
// from B; W reads only those two.
#include "tp/linear.hpp"

namespace mdtp {

class SummaLinear final : public LinearBase {
 public:
  // `activation` is the layout of X and Y, `weight_layout` that of W (both from the mode).
  SummaLinear(const TpContext& ctx, const LinearSpec& spec, const Layout& activation, const Layout& weight_layout,
              const std::vector<std::string>& tp_axes, std::vector<std::string> weight_partial_over);

 protected:
  Tensor matmul_forward(const Tensor& x, LinearSaved& saved) override;
  Tensor input_gradient(const Tensor& dy, LinearSaved& saved) override;
  void weight_gradient(LinearSaved& saved) override;
};

}  // namespace mdtp
