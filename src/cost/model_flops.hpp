#pragma once
// FLOP counts of a GPT training step (T = B·s tokens, l layers, hidden h, sequence s, vocabulary
// V, MLP 4h; a FLOP is a multiply or an add, so a product [m,k]·[k,n] is 2mnk):
//
//   parameters   N = l·(12h² + 13h) + V·h + s·h + 2h   (the tied word embedding counted once)
//   model FLOPs  (PaLM, Chowdhery et al. 2022, appendix B; what MFU divides)
//                F_model = T·(6·N' + 12·l·h·s),  N' = N − s·h (the position table is only
//                looked up), 12·l·h·s the attention scores and their product with V, forward and
//                backward, counted over the full s×s (no causal halving)
//   hardware FLOPs  the matrix products actually run, recomputation included (what HFU divides
//                and what `tflops_per_gpu` reports):
//                F_hw = T·((3 + r)·l·24h² + (3 + r_a)·l·4·h·s + 6·V·h)
//                with r = 1 under full recomputation, r_a = 1 under full or selective
//                (24h² per token: QKV 6h², projection 2h², MLP 16h²; 4hs: Q·Kᵀ and P·V; 2Vh the
//                tied head; backward is twice the forward)
//   Narayanan et al. 2021 (full recomputation): F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)),
//                which is F_hw with r = r_a = 1.
#include <cstdint>

#include "cost/step_config.hpp"

namespace mdtp::cost {

double parameter_count(const ModelShape& model);
double model_flops(const ModelShape& model, std::int64_t global_batch);
double hardware_flops(const ModelShape& model, std::int64_t global_batch, Recompute recompute);
double narayanan_flops(const ModelShape& model, std::int64_t global_batch);

}  // namespace mdtp::cost
