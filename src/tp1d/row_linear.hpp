#pragma once
// Megatron row-parallel Linear: W split by input rows; the partial products are summed by an
// all-reduce (or, under sequence parallelism, a reduce-scatter over the rows).
#include "tp/linear.hpp"

namespace mdtp {

class RowParallelLinear final : public LinearBase {
 public:
  RowParallelLinear(const TpContext& ctx, const LinearSpec& spec, bool sequence_parallel);

 protected:
  Tensor matmul_forward(const Tensor& x) override;
  Tensor matmul_backward(const Tensor& dy) override;

 private:
  bool sequence_parallel_;
  Tensor x_;
};

}  // namespace mdtp
