#pragma once
// GptEmbedding: token embedding (vocabulary-parallel wte) plus, for GPT-2, the learned position
// embedding (wpe; Llama's positions enter in attention, as rotary embeddings), into the residual
// layout L (model_split.hpp has the split):
//
//   forward   every rank looks up ALL B·T tokens of its replica in its vocabulary slice (zero
//             rows for tokens outside it) → partial [B·T, H/|C|] over S;
//             reduce-scatter over the group spanning R (rows)  — or all-reduce over S when R is
//             empty (1D) — then add wpe at position (global row mod T).
//   backward  the embedding's whole backward is a weight pass (W), since nothing is below it:
//             wpe.grad += dX by position (partial over R's span when R splits rows);
//             all-gather dX over R's span, scatter-add into wte.grad for in-slice tokens.
//             backward_input only keeps dX for it.
#include <cstdint>
#include <span>
#include <vector>

#include "model/gpt_config.hpp"
#include "model/gpt_kernels.hpp"
#include "model/model_param.hpp"
#include "model/model_split.hpp"

namespace mdtp {

// What the embedding keeps for one micro-batch.
struct EmbeddingSaved {
  std::vector<std::int32_t> ids;        // the replica's B·T token ids
  std::vector<std::int32_t> positions;  // of this rank's residual rows
  Tensor dx;                            // from backward_input, for the weight pass
};

// The word embedding's name: transformer.wte.weight (gpt2) or model.embed_tokens.weight (llama).
std::string word_embedding_name(const ModelShape& config);

// The tied word embedding wte [V (padded), H] as the model shards it (rows over the vocabulary
// split S, columns over C).  Both the embedding and, on a pipeline's last stage, the LM head's own
// copy are made by this, so the two start identical (values depend on name and index only).  It
// is replicated over, and its gradient partial over, the mesh's `embedding` group (first and last
// pipeline stage; one rank when pp = 1, where nothing is sent) — where the head is tied.
Parameter make_word_embedding(const TensorParallelMode& mode, const ModelSplit& split, const ModelShape& config);
// An untied LM head's own weight lm_head.weight [V (padded), H], sharded like wte and held by the
// head's stage alone.
Parameter make_lm_head_weight(const TensorParallelMode& mode, const ModelSplit& split, const ModelShape& config);
// Its ModelParam (init N(0, 0.02); the padding rows are not in checkpoints).
ModelParam word_embedding_param(Parameter* wte, const ModelShape& config);

class GptEmbedding {
 public:
  GptEmbedding(const TensorParallelMode& mode, const GptKernels& kernels, const ModelSplit& split,
               const ModelShape& config);
  // ids: this replica's B·T tokens (row-major [B, T]); returns this rank's shard in L.
  Tensor forward(std::span<const std::int32_t> ids, EmbeddingSaved& saved);
  void backward_input(const Tensor& dx, EmbeddingSaved& saved);
  void backward_weight(EmbeddingSaved& saved);
  Parameter& wte() { return wte_; }
  std::vector<ModelParam> parameters();

 private:
  TpContext ctx_;
  const GptKernels& kernels_;
  ModelSplit split_;
  ModelShape config_;
  Parameter wte_, wpe_;  // wpe_: gpt2 only
  std::int64_t vocab_row0_ = 0;  // first (padded) vocabulary row of this rank's wte slice
};

}  // namespace mdtp
