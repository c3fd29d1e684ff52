#include "model/lm_head.hpp"

#include <algorithm>
#include <cmath>

#include "mesh/mesh.hpp"

namespace mdtp {

TiedLmHead::TiedLmHead(const TensorParallelMode& mode, const GptKernels& kernels, const ModelSplit& split,
                       Parameter& wte, std::int64_t vocab_size)
    : ctx_(mode.context()), kernels_(kernels), split_(split), wte_(wte), vocab_size_(vocab_size) {
  const ShardBlock b = shard_block(wte_.layout, ctx_.mesh, wte_.full_shape[0], wte_.full_shape[1], wte_.name);
  vocab_col0_ = b.row0();
  valid_cols_ = std::clamp<std::int64_t>(vocab_size_ - vocab_col0_, 0, b.rows);
}

double TiedLmHead::forward(const Tensor& x, std::span<const std::int32_t> targets, LmHeadSaved& saved) {
  require(!saved.logits.defined() && !saved.gathered.defined(),
          "GPT LM head: forward was given the saved state of a micro-batch still in flight");
  const Backend& be = ctx_.backend;
  const Mesh& mesh = ctx_.mesh;
  const auto total = static_cast<std::int64_t>(targets.size());
  require(x.rows() * split_.row_parts == total, "GPT LM head: ", x.rows(), " hidden rows on this rank × ",
          split_.row_parts, " row blocks do not cover the ", total, " targets");
  saved.gathered = x;
  if (split_.row_parts > 1) {
    saved.gathered = be.empty({total, x.cols()}, x.dtype(), MemCategory::activations);
    mesh.comm(split_.row_span).all_gather(x, saved.gathered);
  }
  Tensor partial = be.empty({total, wte_.value.rows()}, x.dtype(), MemCategory::activations);
  be.gemm(false, true, 1.0, saved.gathered, wte_.value, 0.0, partial);
  saved.logits = partial;
  std::int64_t first = 0;
  if (split_.col_parts > 1) {
    Communicator& cols = mesh.comm(split_.col_group);
    require(total % cols.size() == 0, "GPT LM head: ", total, " token rows cannot be split over ", cols.size(),
            " ranks of ", split_.col_group);
    saved.logits = be.empty({total / cols.size(), partial.cols()}, x.dtype(), MemCategory::activations);
    cols.reduce_scatter(partial, saved.logits);
    first = saved.logits.rows() * cols.rank();
  }
  const std::int64_t rows = saved.logits.rows();
  saved.targets.assign(targets.begin() + first, targets.begin() + first + rows);

  Tensor row_max = be.empty({rows}, DType::f64, MemCategory::activations);
  kernels_.xent_row_max(saved.logits, valid_cols_, row_max);
  Tensor sums = be.empty({rows, 2}, DType::f64, MemCategory::activations);
  if (split_.vocab_parts > 1) mesh.comm(split_.vocab_span).all_reduce(row_max, ReduceOp::max);
  kernels_.xent_partial_sums(saved.logits, valid_cols_, row_max, saved.targets, vocab_col0_, sums);
  if (split_.vocab_parts > 1) mesh.comm(split_.vocab_span).all_reduce(sums);

  const std::vector<double> mx = be.to_f64(row_max), s = be.to_f64(sums);
  std::vector<double> lse(static_cast<std::size_t>(rows));
  double loss = 0.0;
  for (std::size_t i = 0; i < lse.size(); ++i) {
    lse[i] = mx[i] + std::log(s[2 * i]);
    loss += lse[i] - s[2 * i + 1];
  }
  saved.lse = be.from_f64(lse, {rows}, DType::f64, MemCategory::activations);
  return loss;
}

Tensor TiedLmHead::backward_input(double scale, LmHeadSaved& saved) {
  require(saved.logits.defined(), "GPT LM head: backward called before forward (or twice for one micro-batch)");
  const Backend& be = ctx_.backend;
  const Mesh& mesh = ctx_.mesh;
  Tensor dlogits = be.empty(saved.logits.shape(), saved.logits.dtype(), MemCategory::activations);
  kernels_.xent_backward(saved.logits, valid_cols_, saved.lse, saved.targets, vocab_col0_, scale, dlogits);
  saved.logits = Tensor();
  saved.lse = Tensor();
  saved.dp = dlogits;
  if (split_.col_parts > 1) {
    saved.dp = be.empty({dlogits.rows() * split_.col_parts, dlogits.cols()}, dlogits.dtype(), MemCategory::activations);
    mesh.comm(split_.col_group).all_gather(dlogits, saved.dp);
  }
  Tensor dg = be.empty(saved.gathered.shape(), saved.gathered.dtype(), MemCategory::activations);
  be.gemm(false, false, 1.0, saved.dp, wte_.value, 0.0, dg);
  if (split_.vocab_parts == 1) return dg;
  if (split_.row_parts == 1) {
    mesh.comm(split_.vocab_span).all_reduce(dg);
    return dg;
  }
  Tensor dx = be.empty({dg.rows() / split_.row_parts, dg.cols()}, dg.dtype(), MemCategory::activations);
  mesh.comm(split_.row_span).reduce_scatter(dg, dx);
  return dx;
}

void TiedLmHead::backward_weight(LmHeadSaved& saved) {
  require(saved.dp.defined(), "GPT LM head: backward_weight needs backward_input of the same micro-batch first");
  ctx_.backend.gemm(true, false, 1.0, saved.dp, saved.gathered, 1.0, wte_.grad);
  saved = LmHeadSaved{};
}

}  // namespace mdtp
