#pragma once
// 2D tensor parallelism (Optimus / SUMMA) on a q×q grid, tp-rank t = r·q + c:
//
//        c=0      c=1            X, W, Y all split q×q: block (r, c) lives on rank (r, c).
//   r=0 [0,0]   [0,1]   ← tp.row (fixed r; group rank = c)
//   r=1 [1,0]   [1,1]
//         ↑ tp.col (fixed c; group rank = r)
//
//   forward  Y(r,c) = Σ_k X(r,k)·W(k,c): q steps, broadcast X(r,k) on tp.row from c=k and
//            W(k,c) on tp.col from r=k (roots are group-local ranks).
//   backward dX(r,j) = Σ_c dY(r,c)·W(j,c)ᵀ: q steps, broadcast W on tp.col, reduce on tp.row to c=j;
//            dW(j,c) = Σ_b X(b,j)ᵀ·dY(b,c): q steps, broadcast X on tp.row, reduce on tp.col to r=j.
// Bias and LayerNorm parameters are split like the columns and replicated over tp.col.
#include "tp/mode.hpp"

namespace mdtp {

class Mode2D final : public TensorParallelMode {
 public:
  using TensorParallelMode::TensorParallelMode;
  TpMode kind() const override { return TpMode::d2; }
  Layout residual_layout() const override { return activation_layout(); }
  std::vector<std::string> tp_axes() const override { return {"tp.row", "tp.col"}; }
  std::unique_ptr<Linear> linear(const LinearSpec& spec, const Layout& input) const override;

  static Layout activation_layout() { return Layout{"2d", {"tp.col"}, {"tp.row"}}; }
  static Layout weight_layout() { return Layout{"2d.weight", {"tp.col"}, {"tp.row"}}; }
};

}  // namespace mdtp
