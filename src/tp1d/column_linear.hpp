#pragma once
// Megatron column-parallel Linear: W split by output columns.  With sequence parallelism the
// input arrives split by rows and is all-gathered first.
#include "tp/linear.hpp"

namespace mdtp {

class ColumnParallelLinear final : public LinearBase {
 public:
  ColumnParallelLinear(const TpContext& ctx, const LinearSpec& spec, bool sequence_parallel);

 protected:
  Tensor matmul_forward(const Tensor& x) override;
  Tensor matmul_backward(const Tensor& dy) override;

 private:
  Tensor gather_rows(const Tensor& x) const;
  bool sequence_parallel_;
  Tensor x_;  // what forward received (the row shard under sequence parallelism)
};

}  // namespace mdtp
