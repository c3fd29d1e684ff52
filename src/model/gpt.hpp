#pragma once
// GptModel: a decoder-only transformer written once against the TensorParallelMode interface, so
// every mode runs the same model — GPT-2 (nanoGPT's architecture and parameter names) or a Llama
// (Hugging Face's, block.hpp has the differences):
//   x = wte[ids] (+ wpe[pos], GPT-2);  x = block_i(x) for each layer;  x = ln_f(x);
//   loss = cross-entropy(x·Wᵀ, targets)  (W = wte when tied — GPT-2's default — else lm_head.weight)
//
// Units and chunks.  The model is a list of units: 0 = the embedding, 1 … L = the blocks, L + 1 =
// the head (ln_f + the tied LM head and the loss).  A GptModel holds the units of one or more
// chunks — runs of consecutive units that one pipeline stage executes for one micro-batch — and
// nothing else: a whole model is one chunk of every unit (what the tests and a pipeline of one
// stage use).  The head of a chunk that does not also hold the embedding owns its own copy of
// wte, made identically (model/embedding.hpp) and kept in step by the `embedding` group's
// gradient all-reduce.
//
// Micro-batches.  Every pass of a chunk takes a ChunkSaved that the caller owns per (chunk,
// micro-batch): forward fills it, backward_input (B) consumes most of it and keeps what the weight
// pass needs, backward_weight (W) releases it.  So any number of micro-batches can be in flight,
// in any order, through one model object.  The fused backward runs each unit's B then its W, unit by unit.
//
// Loss.  The chunk holding the head returns the SUM of the token losses over the logit rows this
// rank holds (every rank of the vocabulary split returns the same sum); reducing it (over the
// logits' row split C and the data-parallel replicas) and scaling it (1/(m·b·T·dp) for m
// micro-batches of b sequences of T tokens on dp replicas) is the caller's, once per step —
// loss_scale() and reduce_loss() do it.  The head's backward takes that scale.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/activation_bytes.hpp"
#include "model/block.hpp"
#include "model/embedding.hpp"
#include "model/gpt_kernels.hpp"
#include "model/lm_head.hpp"
#include "model/unit_hooks.hpp"
#include "spec/names.hpp"
#include "spec/recompute.hpp"

namespace mdtp {

// Global unit indices [first, last], inclusive.
struct UnitRange {
  int first = 0, last = 0;
  bool operator==(const UnitRange&) const = default;
};
// L + 2 units for L blocks.
inline int unit_count(const ModelShape& config) { return static_cast<int>(config.layers) + 2; }

// One micro-batch's tokens on this replica: row-major [b, T] ids and targets, identical on every
// rank of the replica.  The first chunk reads `inputs`, the last `targets`.
struct MicroBatch {
  std::span<const std::int32_t> inputs, targets;
  int index = 0;  // 0-based within the step (hooks receive it)
};

// Activation recomputation (Korthikanti et al. 2022; the policies are spec/recompute.hpp's
// Recompute), none of which changes a result (mdtp's GPT has no dropout and its kernels are
// deterministic, so every recomputed number is bitwise the first):
//   full       keeps only each transformer block's input from its forward and runs the block's
//              forward again, under the ledger phase `recompute`, right before its backward-input
//              pass (the re-run fills the block's state exactly as the first did);
//   selective  keeps everything but the attention core's T×T probabilities, which the block's
//              backward-input pass recomputes (QKᵀ, mask, softmax) from the kept Q, K, V — no
//              communication, so no `recompute` phase appears in the ledger.
// A streaming attention kernel that never keeps the probabilities would make selective and none
// coincide; the memory model takes that as an input (model/activation_bytes.hpp).

// What one chunk keeps for one micro-batch.
struct ChunkSaved {
  EmbeddingSaved embedding;
  std::vector<BlockSaved> blocks;
  std::vector<Tensor> block_inputs;  // full recomputation: each block's input, until its backward
  LayerNormSaved ln_f;
  LmHeadSaved head;
  int microbatch = -1;
  bool forward_done = false, input_done = false;
};

class GptModel;

// A run of consecutive units of a GptModel (a view: the model owns the units).
class ModelChunk {
 public:
  ModelChunk(GptModel& model, UnitRange units) : model_(&model), units_(units) {}
  UnitRange units() const { return units_; }
  bool has_embedding() const { return units_.first == 0; }
  bool has_head() const;

  // x: the residual activation entering the chunk (ignored — may be undefined — when it holds the
  // embedding, which reads mb.inputs).  Returns the activation leaving it, or, for the chunk
  // holding the head, an undefined tensor and the local loss sum in *loss_sum.
  Tensor forward(const Tensor& x, const MicroBatch& mb, ChunkSaved& saved, double* loss_sum = nullptr);
  // B: dy is the gradient of the chunk's output (ignored for the chunk holding the head, whose
  // gradient is loss_scale × d(loss sum)).  Returns the gradient of the chunk's input
  // (undefined for the chunk holding the embedding).
  Tensor backward_input(const Tensor& dy, double loss_scale, ChunkSaved& saved);
  // W: every unit's weight gradients, head first; `last_of_step` marks the step's last W of this
  // chunk, after which each unit's gradients are complete (UnitHooks::grads_ready).
  void backward_weight(ChunkSaved& saved, bool last_of_step = false);
  // The fused backward: unit by unit, head first, each unit's B followed by its W (the same values
  // as B then W; the pipeline runs it where no input gradient waits to be sent upstream:
  // plan/schedule.hpp fused_backward_unit_by_unit).
  Tensor backward(const Tensor& dy, double loss_scale, ChunkSaved& saved, bool last_of_step = false);

  // The chunk's parameters, in nanoGPT state_dict order.
  std::vector<ModelParam> parameters() const;

 private:
  // Unit u's backward-input pass inside the chunk's (hooks around it): the gradient of its input.
  Tensor unit_backward_input(int u, const Tensor& dy, double loss_scale, ChunkSaved& saved);
  // Unit u's weight pass (UnitHooks::before/after_backward_weight around it); on the step's last
  // one, UnitHooks::grads_ready(u).
  void unit_backward_weight(int u, ChunkSaved& saved, bool last_of_step);
  // The chunk's first block (unit ≥ 1) and block u's slot in ChunkSaved::blocks / block_inputs.
  int first_block() const { return std::max(units_.first, 1); }
  std::size_t block_slot(int u) const { return static_cast<std::size_t>(u - first_block()); }
  GptModel* model_;
  UnitRange units_;
};

class GptModel {
 public:
  // Validates everything (config, chunks, divisibility of heads, batch and features by the mode's
  // splits) on every rank before any collective, then builds and initialises the units of
  // `chunks` (GPT-2 init from ctx.seed, by logical index: the same model in every mode, on every
  // mesh and in every pipeline split).  `micro_batch` is b, the sequences of one micro-batch on one
  // replica.  `chunks` empty: one chunk of every unit.  `kernels` (the GPT kernels of the mode's
  // backend, outliving the model) may be null for a host backend: the model then uses its own.
  // The mode (with its mesh and backend) must outlive the model.
  GptModel(const TensorParallelMode& mode, const ModelShape& config, std::int64_t micro_batch,
           std::vector<UnitRange> chunks = {}, std::string data_parallel_group = group::dp,
           const GptKernels* kernels = nullptr);
  GptModel(const GptModel&) = delete;
  GptModel& operator=(const GptModel&) = delete;

  std::vector<ModelChunk>& chunks() { return chunks_; }
  ModelChunk& chunk(std::size_t i) { return chunks_.at(i); }
  bool holds(int unit) const;

  // 1 / (micro_batches · b · T · dp): the scale of each micro-batch's backward so that the
  // gradients are those of the mean loss over the step's tokens.
  double loss_scale(int micro_batches) const;
  // The step's mean loss from this rank's local loss sums (collective over the logits' row split
  // and the data-parallel group: call it on every rank of the stage holding the head).
  double reduce_loss(double local_sum, int micro_batches) const;

  // Partial TP sums, the tied embedding's sum over the `embedding` group, and the data-parallel sum
  // of every gradient (phase grad-sync).
  void reduce_gradients();
  // This model is one of the copies the ranks of `group` hold (DualPipe's mirror stages, which run
  // the same units for different micro-batches): every parameter's gradient becomes partial over
  // the group (summed with the other copies' in the gradient sync, however ZeRO shards it) and its
  // value replicated over it (the global norm counts it once).  Call before any engine reads the
  // parameters.
  void sum_copies_over(const std::string& group);
  void zero_gradients();

  // Recomputation for the passes that follow (the default: none).
  void set_recompute(Recompute policy) { recompute_ = policy; }
  Recompute recompute() const { return recompute_; }

  // Kept-activation sampling (docs/memory.md).  With tracking on, the model remembers the
  // ChunkSaved of every micro-batch in flight (they must stay where forward saw them until their
  // weight pass) and, at the end of every pass, adds up the bytes they hold (held_bytes) and reads
  // the allocator's `activations` counter; the maxima over the passes since the last reset are
  // kept_sample(); the `parameters` counter is read inside every unit's pass too.  Off by default: tracking costs a walk over the live contexts per pass.
  void track_kept_activations(bool on);
  const KeptActivationSample& kept_sample() const { return kept_sample_; }
  void reset_kept_sample() { kept_sample_ = KeptActivationSample{}; }
  // The local shapes that decide what a micro-batch keeps on this rank (activation_bytes.hpp).
  ActivationShapes activation_shapes() const;

  // Hooks the engines attach (null: none; the model never owns them).
  void set_hooks(UnitHooks* hooks) { hooks_ = hooks; }
  UnitHooks* hooks() const { return hooks_; }

  const ModelShape& config() const { return config_; }
  const ModelSplit& split() const { return split_; }
  std::int64_t micro_batch() const { return batch_; }
  std::int64_t batch_per_replica() const { return batch_; }
  int data_parallel_size() const { return dp_size_; }
  // Every parameter this rank holds, by unit in ascending order (a whole model: nanoGPT's
  // state_dict order).
  std::vector<ModelParam>& parameters() { return params_; }
  const std::vector<ModelParam>& parameters() const { return params_; }
  // The parameters of one unit this rank holds (empty for a unit it does not hold); the head's
  // wte copy belongs to the head unit, the embedding's wte to unit 0.
  const std::vector<ModelParam>& unit_parameters(int unit) const;
  std::vector<Parameter*> raw_parameters() const;
  const TensorParallelMode& mode() const { return mode_; }

 private:
  friend class ModelChunk;
  void validate_tokens(std::span<const std::int32_t> ids, const char* what) const;
  void context_started(const ChunkSaved& saved);
  void context_finished(const ChunkSaved& saved);
  void sample_kept();
  void sample_parameters();

  const TensorParallelMode& mode_;
  TpContext ctx_;
  std::unique_ptr<GptKernels> own_kernels_;  // when none were given
  const GptKernels& kernels_;
  ModelShape config_;
  std::int64_t batch_;
  std::string dp_group_;
  int dp_size_ = 1;
  ModelSplit split_;
  std::unique_ptr<GptEmbedding> embedding_;                // unit 0, if held
  std::vector<std::unique_ptr<TransformerBlock>> blocks_;  // block i (unit i + 1), null if not held
  // The head's weight where the embedding's is not at hand: the tied wte's copy (a stage without
  // the embedding) or the untied lm_head.weight.
  std::unique_ptr<Parameter> head_weight_;
  std::unique_ptr<LayerNorm> ln_f_;                        // unit L + 1, if held
  std::unique_ptr<TiedLmHead> head_;
  std::vector<ModelChunk> chunks_;
  std::vector<std::vector<ModelParam>> unit_params_;
  std::vector<ModelParam> params_;
  UnitHooks* hooks_ = nullptr;
  Recompute recompute_ = Recompute::none;
  bool track_kept_ = false;
  std::vector<const ChunkSaved*> live_contexts_;  // while tracking
  KeptActivationSample kept_sample_;
};

// The unit a parameter of this model belongs to, from its name — gpt2 (nanoGPT's):
// transformer.wte.weight and transformer.wpe.weight: 0; transformer.h.<i>.*: i + 1;
// transformer.ln_f.*: L + 1; llama (Hugging Face's): model.embed_tokens.weight: 0;
// model.layers.<i>.*: i + 1; model.norm.*: L + 1; an untied head's lm_head.weight (either family):
// L + 1 — or -1 for a name that is not one.  Checkpoints use it to order and to recognise tensors
// held by other stages.
int unit_of_parameter(const std::string& name, const ModelShape& config);

// The chunks a validated list describes: sorted, non-overlapping, inside [0, L + 1]; an mdtp::Error
// naming the offending range otherwise.
void validate_chunks(const std::vector<UnitRange>& chunks, const ModelShape& config);

}  // namespace mdtp
