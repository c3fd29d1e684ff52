#pragma once
// Linear3D: Y = X·W on a q×q×q cube (mode_3d.hpp has the maths and the mesh).  Both parities
// are this one class: I = input.row_groups[1] (the fine row axis of X) and
// O = input.col_groups[0] (the axis splitting X's columns); parity 0 has I = tp.input,
// O = tp.output, parity 1 the two swapped.  Shapes: X [B, K], W [K, N], Y [B, N].
//
//   shards   X [B/q², K/q]   rows (tp.weight, I), cols O
//            W [K/q², N/q]   rows (O, tp.weight), cols I
//            Y [B/q², N/q]   rows (tp.weight, O), cols I        (= the other parity)
//
// Collectives of one forward + backward, in the order the ledger records them (a non-blocking
// call is recorded when it is waited on).  Elements are those of the full (gathered) buffer, as
// the ledger counts them; every group has q ranks.  q = 1 issues none.
//
//   forward (both options)
//     1. all_gather     I          B·K/q²   X shard → X(j,k) [B/q, K/q]
//     2. all_gather     tp.weight  K·N/q²   W shard → W(k,i) [K/q, N/q]   (issued first, overlaps 1)
//     3. reduce_scatter O          B·N/q²   X(j,k)·W(k,i) summed over k → Y shard
//   backward, keep_gathered_3d = true (X(j,k) and W(k,i) kept: q× the shards' memory)
//     4. all_gather     O          B·N/q²   dY shard → dY(j,i)
//     5. reduce_scatter I          B·K/q²   dY(j,i)·W(k,i)ᵀ summed over i → dX shard
//     6. reduce_scatter tp.weight  K·N/q²   X(j,k)ᵀ·dY(j,i) summed over j → += W.grad
//   backward, keep_gathered_3d = false (only the X shard is kept; W's shard is the parameter)
//     4. all_gather     O          B·N/q²   dY
//     5. all_gather     tp.weight  K·N/q²   W again
//     6. all_gather     I          B·K/q²   X again
//     7. reduce_scatter I          B·K/q²   dX
//     8. reduce_scatter tp.weight  K·N/q²   dW
//
// Overlap (the list above is unchanged by it): forward starts W's gather before X's; backward
// starts every gather at once, computes dX as soon as dY and W are in, and lets dX's
// reduce-scatter run while the dW product is computed.
//
// Bias (LinearBase): split like Y's columns over I, replicated over the tp.weight×O plane, its
// gradient partial over that plane.
#include <string>

#include "tp/linear.hpp"

namespace mdtp {

class Linear3D final : public LinearBase {
 public:
  // `input` must be Mode3D::activation_layout(0) or (1); the output is the other one.
  Linear3D(const TpContext& ctx, const LinearSpec& spec, const Layout& input);

 protected:
  Tensor matmul_forward(const Tensor& x) override;
  Tensor matmul_backward(const Tensor& dy) override;

 private:
  std::string input_group_;   // I: gathers X, reduce-scatters dX; splits W's and Y's columns
  std::string output_group_;  // O: reduce-scatters Y, gathers dY; splits X's columns
  bool keep_gathered_;
  Tensor x_kept_;  // keep_gathered_3d: X(j,k), else this rank's X shard
  Tensor w_kept_;  // keep_gathered_3d: W(k,i), else undefined (the parameter is the shard)
};

// Divisibility a 3D Linear on a q-cube needs, checked locally (every rank alike) before any
// collective: in_features K by q² (W's rows), out_features N by q (W's and Y's columns).
void require_3d_features(int q, std::int64_t in_features, std::int64_t out_features, const std::string& who);
// The batch (rows of the full X, B = batch·seq) by q² (X's rows over tp.weight × I).
void require_3d_batch(int q, std::int64_t batch, const std::string& who);

}  // namespace mdtp
