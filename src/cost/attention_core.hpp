#pragma once
// The attention core of one rank's micro-batch — softmax(Q·Kᵀ/√d)·V over every local head and
// sequence, and its backward — timed on one GPU of a Cluster (kernel_time.hpp), in the two forms a
// GPU runs it:
//
//   materialised  cuBLAS batched products over every local head and sequence (Q·Kᵀ [s,d]·[d,s],
//                 P·V forward; dP = dO·Vᵀ and dV, dQ, dK like P·V backward) and the s×s scores
//                 through HBM: scale+mask+softmax 2·E_A·δ forward, 3·E_A·δ backward, attention
//                 dropout (2δ+μ)·E_A each way (E_A = heads·sequences·s², δ the dtype's bytes, μ one
//                 byte of mask); one kernel per products and per streaming pass
//   streaming     (FlashAttention-style, Dao et al. 2022) one kernel per pass whose scores stay on
//                 chip: forward reads Q, K, V and writes O; backward recomputes the scores (a fifth
//                 product) and reads Q, K, V, O, dO and writes dQ, dK, dV.  A causal kernel skips
//                 the blocks above the diagonal: of n = ⌈s/128⌉ blocks per row it computes
//                 n(n + 1)/2 tiles of 128 x 128 scores, and each of its n rows of queries pays a
//                 fixed cost of c tiles (loading Q, the softmax's final rescale, writing O: the
//                 cluster's attention_tile_overhead), so it does causal_tile_share(s) =
//                 (n(n + 1)/2 + c·n)/n² of the products' work, at the GPU's attention_efficiency
//                 (the kernel's published benchmarks; the backward at its own published rate where
//                 the cluster gives one) or, where the cluster gives none, at the GEMM model's tiles
//                 and waves (an upper bound).  Benchmarks count a causal kernel's work as half the
//                 scores; a rate measured so at attention_reference_seq s_ref is a rate of
//                 2·share(s_ref) on the work done.  Rate against length, counted that way, is then
//                 n/(n + 1 + 2c) up to a constant: it rises with the sequence as the diagonal's
//                 half-empty tiles and the rows' fixed cost spread over more tiles, the curve the
//                 FlashAttention-2 and -3 papers publish (docs/performance-model.md §2)
//
// The step model (layer_costs.hpp) and the simulated cluster's charged kernels
// (simulate/charging_gpt_kernels.hpp) both time the core here, so they cannot disagree.
#include <cstdint>

#include "core/dtype.hpp"
#include "cost/cluster.hpp"
#include "cost/pass_cost.hpp"

namespace mdtp::cost {

// What one rank computes: `sequences` local sequences of `seq` tokens, `query_heads` local query
// heads and `kv_heads` local key/value heads (grouped-query attention: fewer), each `head_dim` wide.
struct AttentionCoreShape {
  std::int64_t seq = 0, head_dim = 0, query_heads = 0, kv_heads = 0, sequences = 0;
};

struct AttentionCoreCosts {
  PassCost forward, backward;  // gemm_* the products (the whole kernel when streaming), stream_* the rest
};

// The share of a full s x s product's work a causal streaming kernel does, its rows' fixed cost
// `tile_overhead` (in 128 x 128 tiles) included: (n(n + 1)/2 + c·n)/n², n = ⌈s/128⌉.
double causal_tile_share(std::int64_t seq, double tile_overhead);

AttentionCoreCosts attention_core_costs(const AttentionCoreShape& shape, DType dtype, bool dropout, bool streaming,
                                        const Cluster& cluster);

}  // namespace mdtp::cost
