#pragma once
// The kernels mdtp's own engine launches for one transformer block and one micro-batch on one rank,
// as its layers call them — one kernel per Backend or model-kernel call — with the bytes each reads
// and writes, read off the same Geometry as the GEMM list and the collective plan.
//
// Why a second list beside layer_costs.hpp's: the step model prices Megatron-LM's fused kernels
// (two bias+dropout+add, a LayerNorm, bias+GeLU: about a dozen kernels a pass).  mdtp's engine
// runs the same maths unfused — each LayerNorm as three kernels forward (row statistics, their
// merge across the hidden split, the application) and two backward, each bias as its own add and
// its gradient as its own column sum, the residual adds apart — and on a simulated cluster each of
// them is charged its bytes and the GPU's per-kernel overhead (simulate/charging_backend.hpp).  A
// step model held against that simulation must price these kernels (`mdtp cost --engine-kernels`);
// a test holds this list against the kinds, calls and bytes the engine's kernels were charged.
//
// Per block and micro-batch (δ the activations' bytes, γ the gradients'; x a LayerNorm input
// shard of r rows, p its hidden split, c its columns; y a Linear's output shard, b its bias shard;
// E_r the residual shard, E_f the activation's input, E_h its output, E_qk the rotated Q and K):
//   forward          per norm  row_mean_m2 x·δ + 16r, merge_row_stats 16·r·p + 16r,
//                              layernorm_apply 3x·δ + 16r + 2c·δ
//                    per biased Linear  add_row_vector (2y + b)·δ
//                    gelu_forward / swiglu_forward (E_f + E_h)·δ, rope 2E_qk·δ,
//                    two residual axpy 3E_r·δ, the attention core (attention_core.hpp)
//   backward-input   per norm  layernorm_backward_sums 2x·δ + c·δ + 16r,
//                              layernorm_backward 3x·δ + c·δ + 4c·γ + 32r (RMSNorm: and a fill
//                              of c·γ, the β gradient it drops)
//                    gelu_backward / swiglu_backward (2E_f + E_h)·δ, rope 2E_qk·δ, two residual
//                    axpy 3E_r·δ, the attention core's backward
//   backward-weight  per biased Linear  column_sums y·δ + b·γ; 3D: per Linear an axpy of the
//                    reduce-scattered weight gradient into the gradient, 3w·γ
// The vocabulary units (model/embedding.cpp, model/lm_head.cpp; L the looked-up elements [rows,
// h/|C|], L_r those of this rank's rows after the reduce-scatter over R; n the logits [r', V/|S|]
// of r' rows):
//   embedding  forward          embedding_forward 2L·δ; GPT-2's positions: embedding_forward
//                               2L_r·δ and their axpy 3L_r·δ
//              backward-weight  embedding_backward 3L·δ (positions: 3L_r·δ)
//   head       forward          the final norm (as above), xent_row_max n·δ + 8r',
//                               xent_partial_sums n·δ + 24r'
//              backward-input   xent_backward 2n·δ + 8r', the final norm's backward
// The GEMMs are compute_model.hpp's plan_gemms and the head's three (not repeated here).
#include <string>
#include <vector>

#include "cost/attention_core.hpp"
#include "cost/geometry.hpp"

namespace mdtp::cost {

struct KernelCall {
  std::string kind;  // the Backend or model-kernel call ("layernorm_apply", "axpy", ...)
  double bytes = 0.0;
};

// One unit's kernels for one micro-batch, by the pass that launches them.
struct UnitKernels {
  std::vector<KernelCall> forward, backward_input, backward_weight;
};

// `attention`, `mlp`, `layernorm`: the block's layers' geometries; `rotary_qk_elements` E_qk (0
// without rotary positions); `core`: the attention core's costs as the engine runs it.
UnitKernels engine_block_kernels(const Geometry& attention, const Geometry& mlp, const Geometry& layernorm,
                                  bool gated_mlp, bool rms_norm, double rotary_qk_elements,
                                  const AttentionCoreCosts& core);

// The embedding's: `lookup` L and `local` L_r elements, `positions` GPT-2's table.
UnitKernels engine_embedding_kernels(double lookup, double local, bool positions, DType dtype);
// The head's: the final norm (`layernorm`'s geometry), then `logits` n of `logit_rows` r' rows.
UnitKernels engine_head_kernels(const Geometry& layernorm, bool rms_norm, double logit_rows, double logits);

}  // namespace mdtp::cost
