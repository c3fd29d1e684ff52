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
//   backward input (B), keep_gathered_3d = true (X(j,k) and W(k,i) kept: q× the shards' memory)
//     4. all_gather     O          B·N/q²   dY shard → dY(j,i)
//     5. reduce_scatter I          B·K/q²   dY(j,i)·W(k,i)ᵀ summed over i → dX shard
//   backward weight (W)
//     6. reduce_scatter tp.weight  K·N/q²   X(j,k)ᵀ·dY(j,i) summed over j → += W.grad
//   keep_gathered_3d = false (only the X shard is kept; W's shard is the parameter)
//     B  4. all_gather     O          B·N/q²   dY
//        5. all_gather     tp.weight  K·N/q²   W again
//        6. reduce_scatter I          B·K/q²   dX
//     W  7. all_gather     I          B·K/q²   X again
//        8. reduce_scatter tp.weight  K·N/q²   dW
//
// Kept per micro-batch (LinearSaved): x (the shard, or X(j,k) under keep), w (W(k,i) under keep,
// released by B), and from B the gathered dY(j,i) for W (q× the dY shard, which is a view of it).
// Overlap (the list above is unchanged by it): forward starts W's gather before X's; B starts
// the gathers of dY and W together.
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
  LinearActivationAllocs activation_allocs(std::int64_t tokens) const override;

 protected:
  Tensor matmul_forward(const Tensor& x, LinearSaved& saved) override;
  Tensor input_gradient(const Tensor& dy, LinearSaved& saved) override;
  void weight_gradient(LinearSaved& saved) override;

 private:
  std::string input_group_;   // I: gathers X, reduce-scatters dX; splits W's and Y's columns
  std::string output_group_;  // O: reduce-scatters Y, gathers dY; splits X's columns
  bool keep_gathered_;
};

// Divisibility a 3D Linear on a q-cube needs, checked locally (every rank alike) before any
// collective: in_features K by q² (W's rows), out_features N by q (W's and Y's columns).
void require_3d_features(int q, std::int64_t in_features, std::int64_t out_features, const std::string& who);
// The batch (rows of the full X, B = batch·seq) by q² (X's rows over tp.weight × I).
void require_3d_batch(int q, std::int64_t batch, const std::string& who);

}  // namespace mdtp
