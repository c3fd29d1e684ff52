#pragma once
// Megatron column-parallel Linear: W split by output columns.  With sequence parallelism the
// input arrives split by rows and is all-gathered first.
//
// Kept per micro-batch (LinearSaved): x = what forward received (the replicated X, or under
// sequence parallelism only the row shard, as Megatron keeps it), dy = the dY column shard.
//   B  dX = dY·Wᵀ, then all-reduce over tp (Megatron's f), or reduce-scatter to row shards (SP)
//   W  dW += Xᵀ·dY; under SP X is all-gathered again first
#include "tp/linear.hpp"

namespace mdtp {

class ColumnParallelLinear final : public LinearBase {
 public:
  ColumnParallelLinear(const TpContext& ctx, const LinearSpec& spec, bool sequence_parallel);
  LinearActivationAllocs activation_allocs(std::int64_t tokens) const override;

 protected:
  Tensor matmul_forward(const Tensor& x, LinearSaved& saved) override;
  Tensor input_gradient(const Tensor& dy, LinearSaved& saved) override;
  void weight_gradient(LinearSaved& saved) override;

 private:
  Tensor gather_rows(const Tensor& x) const;
  bool sequence_parallel_;
};

}  // namespace mdtp
