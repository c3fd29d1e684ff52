#pragma once
// GptEmbedding: token embedding (vocabulary-parallel wte) plus position embedding (wpe), into the
// residual layout L (model_split.hpp has the split):
//
//   forward   every rank looks up ALL B·T tokens of its replica in its vocabulary slice (zero
//             rows for tokens outside it) → partial [B·T, H/|C|] over S;
//             reduce-scatter over the group spanning R (rows)  — or all-reduce over S when R is
//             empty (1D) — then add wpe at position (global row mod T).
//   backward  wpe.grad += dX by position (partial over R's span when R splits rows);
//             all-gather dX over R's span, scatter-add into wte.grad for in-slice tokens.
#include <cstdint>
#include <span>
#include <vector>

#include "model/gpt_config.hpp"
#include "model/gpt_kernels.hpp"
#include "model/model_param.hpp"
#include "model/model_split.hpp"

namespace mdtp {

class GptEmbedding {
 public:
  GptEmbedding(const TensorParallelMode& mode, const GptKernels& kernels, const ModelSplit& split,
               const GptConfig& config);
  // ids: this replica's B·T tokens (row-major [B, T]); returns this rank's shard in L.
  Tensor forward(std::span<const std::int32_t> ids);
  void backward(const Tensor& dx);
  Parameter& wte() { return wte_; }
  std::vector<ModelParam> parameters();

 private:
  TpContext ctx_;
  const GptKernels& kernels_;
  ModelSplit split_;
  GptConfig config_;
  Parameter wte_, wpe_;
  std::int64_t vocab_row0_ = 0;  // first (padded) vocabulary row of this rank's wte slice
  std::vector<std::int32_t> ids_, positions_;
};

}  // namespace mdtp
