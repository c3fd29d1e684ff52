#pragma once
// Megatron row-parallel Linear: W split by input rows; the partial products are summed by an
// all-reduce (or, under sequence parallelism, a reduce-scatter over the rows).
//
// Kept per micro-batch (LinearSaved): x = the X column shard; dy = the dY this rank received.
//   B  dX = dY·Wᵀ (no communication); under SP dY's row shards are all-gathered first and the
//      gathered dY is kept for W (dy becomes a view of this rank's rows of it)
//   W  dW += Xᵀ·dY (the gathered dY under SP)
#include "tp/linear.hpp"

namespace mdtp {

class RowParallelLinear final : public LinearBase {
 public:
  RowParallelLinear(const TpContext& ctx, const LinearSpec& spec, bool sequence_parallel);
  LinearActivationAllocs activation_allocs(std::int64_t tokens) const override;

 protected:
  Tensor matmul_forward(const Tensor& x, LinearSaved& saved) override;
  Tensor input_gradient(const Tensor& dy, LinearSaved& saved) override;
  void weight_gradient(LinearSaved& saved) override;

 private:
  bool sequence_parallel_;
};

}  // namespace mdtp
