#pragma once
// FLOP counts of a training step (T = B·s tokens, l layers, hidden h, sequence s, vocabulary V;
// a FLOP is a multiply or an add, so a product [m,k]·[k,n] is 2mnk), for GPT-2 and Llama alike,
// from the block's widths (block_widths.hpp): Q|K|V width q (GPT-2 3h; Llama (a + 2·kv)·h/a),
// MLP width F (GPT-2 4h) with fc1 of k·F (k = 1 GeLU, 2 SwiGLU's fused gate|up):
//
//   parameters   N = l·(W + b + n) + V·h·(2 if untied else 1) + s·h (GPT-2's position table) + n/2
//                W = h·q + h² + h·k·F + F·h   the block's four weights (GPT-2: 12h²)
//                b = q + h + k·F + h           its biases (GPT-2: 9h; Llama none)
//                n = 2·2h (LayerNorm γ, β) or 2·h (RMSNorm γ)  its two norms; the final norm n/2
//   model FLOPs  (PaLM, Chowdhery et al. 2022, appendix B; what MFU divides)
//                F_model = T·(6·N' + 12·l·h·s),  N' = N less the tables that are only looked up
//                (GPT-2's position table; an untied model's word embedding — its head is a
//                product, the embedding a lookup), 12·l·h·s the attention scores and their
//                product with V, forward and backward, over the full s×s (no causal halving);
//                grouped-query attention shares K and V between query heads but every query
//                head still scores s keys, so the term keeps h
//   hardware FLOPs  the matrix products actually run, recomputation included (what HFU divides
//                and what `tflops_per_gpu` reports):
//                F_hw = T·((3 + r)·l·2W + (3 + r_a)·l·4·h·s + 6·V·h)
//                with r = 1 under full recomputation, r_a = 1 under full or selective
//                (2W per token: GPT-2's 24h² = QKV 6h², projection 2h², MLP 16h²; 4hs: Q·Kᵀ and
//                P·V; 2Vh the LM head, tied or not; backward is twice the forward)
//   Narayanan et al. 2021 (full recomputation, GPT shapes): F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)),
//                which is F_hw with r = r_a = 1 for a GPT-2 block.
#include <cstdint>

#include "cost/step_config.hpp"

namespace mdtp::cost {

double parameter_count(const ModelShape& model);
double model_flops(const ModelShape& model, std::int64_t global_batch);
double hardware_flops(const ModelShape& model, std::int64_t global_batch, Recompute recompute);
double narayanan_flops(const ModelShape& model, std::int64_t global_batch);

}  // namespace mdtp::cost
