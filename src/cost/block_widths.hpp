#pragma once
// What a block family changes in the shapes the cost model reads (geometry.hpp), and nothing else:
// the width of attention's fused Q|K|V projection, the width of the MLP's first Linear, which
// parameters the Linears and the norms carry, and whether attention rotates Q and K in place
// (rotary positions: streaming traffic only, no shape changes and no communication).  Everything
// else about a block — the collectives of a Linear, of a norm, the attention core — follows from
// these shapes, so GPT-2's and Llama's costs are read off one Geometry (model/attention.hpp,
// model/block.hpp, tp/mlp.hpp, tp/layernorm.hpp):
//
//                 qkv_features        fc1 (of F = ffn)    Linear biases   norm parameters   rotary
//   gpt2          3·H                 F (GeLU)            yes             γ, β (LayerNorm)  no
//   llama         (heads + 2·kv')·d   2F (SwiGLU's fused  no              γ (RMSNorm: the   yes
//                 (d = H/heads,       gate|up, one GEMM)                  LayerNorm path
//                                                                         uncentred)
//
// The defaults are GPT-2's, with the QKV width left to the workload's hidden size, so a Workload
// that says nothing of its family (the layer benchmark, the TP tests) is GPT-2's.
#include <cstdint>

#include "spec/run_spec.hpp"

namespace mdtp::cost {

struct BlockWidths {
  std::int64_t qkv_features = 0;  // attention's fused projection's output width; 0: 3·hidden
  int fc1_factor = 1;             // the MLP's fc1 is fc1_factor·F wide (2: a gated activation)
  bool linear_bias = true;        // every Linear has a bias
  bool norm_shift = true;         // every norm has β (LayerNorm); false: γ alone (RMSNorm)
  bool rotary = false;            // RoPE on Q and K inside attention
  bool operator==(const BlockWidths&) const = default;
};

// The widths of a model's blocks, from its family and sizes, as stored where `head_split` ranks
// split the heads: with fewer key/value heads than that, each rank stores a copy of the K/V head
// its query heads read (model/attention.hpp), so the QKV projection is (heads + 2·head_split)·d
// wide in storage.  head_split = 1: the model's own widths (its FLOPs and parameter count).
BlockWidths block_widths(const ModelShape& model, int head_split = 1);

// Outside the blocks, the family decides one table: GPT-2's learned positions (wpe [seq, H],
// added by the embedding); Llama's positions are rotary, inside attention, with no table.
bool has_position_table(const ModelShape& model);

}  // namespace mdtp::cost
