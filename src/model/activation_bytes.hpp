#pragma once
// What one micro-batch keeps between passes on one rank, exactly, per unit — the activation
// memory model that the trainer holds against the allocator (docs/memory.md).
//
// A unit's context holds, from its forward F until its backward-input pass B ("after forward"),
// and from B until its weight pass W ("after input"), these tensors (δ the dtype's bytes, E_r the
// residual shard r_rows × r_cols × δ, E_qkv the QKV shard (GPT-2: 3H columns; Llama: (heads +
// 2·kv)·d, after RoPE, which rotates in place), E_y the attention output shard that c_proj reads,
// E_f fc1's output shard (the activation's input), E_h the activation's output shard (fc2's
// input: E_f for GeLU, E_f/2 for SwiGLU, whose h = silu(gate)·up halves the [gate | up] columns,
// tp/mlp.cpp), n_h the local heads, T the sequence length):
//   block, after F   norm 1 and norm 2: x̂ (E_r) and f64 mean/rstd (r_rows × 16) each (RMSNorm
//                    too: (0, 1/rms)); c_attn's input (norm 1's output, E_r); QKV (E_qkv); the
//                    probabilities (qkv_rows/T · n_h · T² · δ, unless selective recomputation drops
//                    them or the kernel streams); c_proj's input E_y; fc1's input (E_r); fc1's output
//                    (E_f) and the activation's (E_h).
//                    Full recomputation: the block input alone (E_r).
//   block, after B   each Linear's input and its dY (c_attn: E_r + g₁·E_qkv; c_proj: E_y + g₂·E_r;
//                    fc1: E_r + g₃·E_f; fc2: E_h + g₄·E_r), g the factor by which the mode gathers
//                    dY and keeps the gathered tensor (1D-SP row-parallel: tp; 3D: the input
//                    layout's column group; else 1).  The same under every recomputation policy.
//   head, after F    the final norm (E_r + r_rows × 16), G (the row-gathered final hidden state:
//                    gathered_rows × r_cols × δ), the logits (logits_rows × vocab_cols × δ) and
//                    their f64 log-sum-exp (logits_rows × 8)
//   head, after B    G and dP (tokens × vocab_cols × δ: dlogits gathered over the logits' rows)
//   embedding        nothing after F (token ids live in host vectors); its input gradient (E_r)
//                    after B.
#include <array>
#include <cstdint>
#include <vector>

#include "spec/run_spec.hpp"
#include "tp/linear.hpp"

namespace mdtp {

struct ChunkSaved;

// Local extents on one rank (GptModel::activation_shapes fills them from the layouts of the
// layers it holds; the block fields are 0 on a rank that holds no block).
struct ActivationShapes {
  std::int64_t dtype_bytes = 4, seq = 0, tokens = 0;  // tokens = b · T of one micro-batch
  std::int64_t residual_rows = 0, residual_cols = 0;
  std::int64_t qkv_rows = 0, qkv_cols = 0, core_cols = 0, local_heads = 0;
  std::int64_t mlp_rows = 0, mlp_cols = 0;
  std::int64_t head_gathered_rows = 0, logits_rows = 0, vocab_cols = 0;
  // The head's and the embedding's splits (model_split.hpp): the residual's token rows, the
  // logits' rows, the vocabulary.
  std::int64_t row_parts = 1, col_parts = 1, vocab_parts = 1;
  // What each Linear says its passes allocate (Linear::activation_allocs).
  std::array<LinearActivationAllocs, 4> linear_allocs{};  // c_attn, c_proj, fc1, fc2
  // What the block family changes (set_block_family; GPT-2's by default): fc1's output columns per
  // activation output column (1: GeLU; 2: SwiGLU), whether the embedding adds a position table's
  // rows (GPT-2's wpe; Llama's positions are rotary), and the bytes of the scratch row an RMSNorm's
  // backward writes its discarded column sums (the dβ LayerNorm would have) into: this rank's
  // hidden columns in the gradients' dtype (tp/layernorm.cpp); 0 for LayerNorm.
  std::int64_t mlp_gate_factor = 1;
  bool position_rows = true;
  std::int64_t norm_scratch_bytes = 0;
};

// Sets the family's members of `shapes` from the model (its family) and the gradients' dtype.
// GptModel::activation_shapes fills the layers' extents; these follow from which layers the
// family builds (model/block.hpp).
void set_block_family(ActivationShapes& shapes, const ModelShape& model, std::int64_t grad_dtype_bytes);

// The bytes of one micro-batch's tensors on this rank, from the local extents (δ the dtype's bytes).
struct ActivationTensorBytes {
  std::int64_t E_r = 0;    // a residual shard: r_rows × r_cols × δ
  std::int64_t stats = 0;  // a LayerNorm's f64 pair per residual row: r_rows × 16
  std::int64_t E_qkv = 0, E_y = 0;  // QKV, the attention output
  std::int64_t E_f = 0, E_h = 0;    // fc1's output (the activation's input), the activation's output
  std::int64_t norm_scratch = 0;    // RMSNorm's discarded-dβ row (0 for LayerNorm)
  std::int64_t probs = 0;                    // the softmax probabilities: qkv_rows/T · n_h · T² · δ
  std::int64_t G = 0;          // the head's row-gathered final hidden state: gathered_rows × r_cols × δ
  std::int64_t logits = 0;     // this rank's logits: logits_rows × vocab_cols × δ
  std::int64_t dp = 0;         // dlogits gathered over the logits' rows: tokens × vocab_cols × δ
  std::int64_t lse = 0;        // the f64 log-sum-exp: logits_rows × 8
};
ActivationTensorBytes tensor_bytes(const ActivationShapes& shapes);

// A block's context after its forward without recomputation: both norms (x̂ and statistics),
// c_attn's input, QKV, the probabilities (when kept), c_proj's input, fc1's input, fc1's and the
// activation's outputs.
std::int64_t block_context_bytes(const ActivationTensorBytes& t, bool probabilities);

// What the recomputation policy and the attention kernel keep.
struct KeepPolicy {
  bool block_input_only = false;             // full recomputation
  bool attention_probabilities = true;       // false: selective recomputation, or a streaming kernel
};

struct UnitActivationBytes {
  std::int64_t after_forward = 0, after_input = 0;
};

// Per unit (0 = embedding, 1 … n_layer = blocks, n_layer + 1 = head), one micro-batch.
std::vector<UnitActivationBytes> unit_activation_bytes(const ActivationShapes& shapes, std::int64_t n_layer,
                                                       KeepPolicy policy);

// The bytes a context holds: the union of its tensors' memory (views of one tensor, such as a
// kept dY that is a slice of the gathered dY, count once), whatever their allocator category.
std::int64_t held_bytes(const ChunkSaved& saved);

// Maxima over the pass ends sampled by GptModel (track_kept_activations).
struct KeptActivationSample {
  std::int64_t kept_peak = 0;       // Σ held_bytes over the contexts in flight
  std::int64_t allocator_peak = 0;  // the allocator's `activations` counter at the same points
  int samples = 0;
  // The allocator's `parameters` counter inside every unit's pass, after the hooks that gather
  // its parameters (ZeRO-3: the shards plus the gathered buckets in use and prefetched).
  std::int64_t parameters_in_pass_peak = 0;
};

}  // namespace mdtp
