#pragma once
// LayerCosts: the work of one micro-batch on one rank, per unit of the model (a transformer block,
// the embedding, the final norm + LM head + cross-entropy), split into the passes the
// pipeline schedules: forward F, backward-input B, backward-weight W, plus what recomputation
// adds before B.  Everything is read off the same Geometry as the exact collective plan
// (geometry.hpp), so shapes cannot disagree:
//
//   GEMMs        plan_gemms of attention's Linears (c_attn H → 3H, or (heads + 2·kv)·d with
//                grouped-query attention; c_proj H→H) and the MLP (H → F → H, or H → 2F → F → H
//                with SwiGLU's fused gate|up: block_widths.hpp), plus
//                the attention core over every local head and sequence: Q·Kᵀ [s,d]·[d,s] and P·V
//                forward; dP, dV, dQ, dK backward (all B: no weight), batched kernels; each
//                kernel timed by its tiles and waves on the SMs or its roofline (kernel_time.hpp).
//                A streaming attention kernel instead: one kernel per pass, the causal part of
//                the products at the GPU's attention rate, Q, K, V, O (and their gradients)
//                through HBM, the backward recomputing the scores
//   streaming    bytes read + written per kernel (Megatron's fused kernels; E_r the residual shard,
//                E_c c_proj's input shard, E_f fc1's output shard (the activation's input), E_h
//                fc2's input shard (its output: E_f under GeLU, E_f/2 under SwiGLU), E_qk this
//                rank's Q and K columns (rotary positions; 0 without), E_A = local heads·local
//                sequences·s² the scores; δ the dtype's bytes, μ = 1 byte of dropout mask or 0):
//                  forward   2 norms 2·2E_r·δ, 2 bias+dropout+add 2·(3δ+μ)E_r, context
//                            transpose 2E_c·δ, activation (E_f + E_h)·δ, RoPE 2E_qk·δ, and,
//                            materialised, scale+mask+softmax 2E_A·δ, attention dropout (2δ+μ)E_A
//                  backward  norms 2·3E_r·δ, bias+dropout+add 2·(3δ+μ)E_r, transpose 2E_c·δ,
//                            activation (2E_f + E_h)·δ (reads its input and dY, writes dX), RoPE
//                            2E_qk·δ, materialised softmax 3E_A·δ and dropout (2δ+μ)E_A;
//                each kernel also pays the GPU's per-kernel overhead
//   collectives  plan_step of the attention, MLP and both norms (forward, backward; the
//                grad-sync calls once per step), and the embedding/head calls of
//                model/embedding.hpp and model/lm_head.hpp; timed by the cluster's α-β model on
//                the link class of each group (the TP groups of one tp-sized mesh placed on nodes
//                of gpus_per_node)
//   activations  what a micro-batch leaves for backward (Korthikanti et al. 2022, itemised from the
//                shards — every Linear's input, c_attn's and fc1's outputs, two norms — so a wider
//                QKV or a gated MLP changes it through the shapes alone; GPT-2 in 1D gives
//                sbh(10 + 24/t + 5as/(ht)), 1d-sp sbh(34/t + 5as/(ht))): `core`
//                is the 5as/h part (softmax output, its dropout mask and output) that selective
//                recomputation drops; `input` the block input full recomputation keeps
#include <cstdint>
#include <optional>
#include <vector>

#include "cost/cluster.hpp"
#include "cost/cost_model.hpp"
#include "cost/engine_kernels.hpp"
#include "cost/pass_cost.hpp"
#include "cost/step_config.hpp"

namespace mdtp::cost {

// The passes of one unit for one micro-batch on one rank (pass_cost.hpp).
struct UnitCosts {
  PassCost forward, backward_input, backward_weight;
  PassCost attention_core;  // the forward of Q·Kᵀ, softmax, dropout, P·V: selective recomputation
  // What recomputation adds before backward-input: nothing, the attention core, or the forward.
  PassCost recompute(Recompute recompute) const;
};

struct ActivationBytes {
  double core = 0.0;   // dropped by selective recomputation
  double rest = 0.0;   // everything else kept without recomputation
  double input = 0.0;  // the block input, all that full recomputation keeps
  double kept(Recompute recompute) const;
  double full() const { return core + rest; }
};

struct LayerCosts {
  UnitCosts block, embedding, head;
  double block_params = 0.0;      // elements on one rank, one block
  int block_param_tensors = 0;    // parameter tensors of one block (one accumulation kernel each)
  // Of block_params, the elements whose gradient is partial over exactly tp.dep (2.5D weights):
  // ZeRO treats their depth copies as data-parallel replicas and shards them over dp × depth.
  double block_depth_replica_params = 0.0;
  double embedding_params = 0.0;  // wte shard (+ the wpe shard, GPT-2) (first stage)
  // The final norm, and an untied head's own weight (a tied head's wte copy on a stage without
  // the embedding is counted by the caller).
  double head_params = 0.0;
  double wte_params = 0.0;        // the wte shard alone
  ActivationBytes block_activations;
  double head_activation_bytes = 0.0;       // final LayerNorm input, gathered G, fp32 softmax of the logits
  double head_logits = 0.0;                 // logits of one micro-batch on this rank (rows x vocabulary shard)
  double boundary_elements = 0.0;           // the residual shard that crosses a stage boundary
  std::vector<PlannedCall> block_grad_sync;  // per block, once per step (partial-gradient sums)
  double block_grad_sync_seconds = 0.0;
  LinkClass tp_link = LinkClass::intra_node;  // of the "tp" group
  // The non-GEMM kernels of a block, the embedding and the head for one micro-batch as mdtp's
  // engine launches them (priced in the passes above when asked for; listed always, for the tests
  // that hold them against the engine).
  UnitKernels block_kernels, embedding_kernels, head_kernels;
};

// What a block's kernels are, besides its shape, layout and dtype: named, so that a call reads
// `{.dropout = true, .streaming_attention = true}` rather than a row of positional flags.
struct KernelOptions {
  bool dropout = false;  // dropout masks written and read (their bytes in the streaming kernels)
  // The core as one FlashAttention-style kernel per pass (no s×s tensor in HBM) instead of batched
  // GEMMs around a materialised softmax.
  bool streaming_attention = false;
  // The streaming kernels of the block and the vocabulary units as mdtp's engine launches them
  // (engine_kernels.hpp) instead of Megatron-LM's fused list.
  bool engine_kernels = false;
  // The gradients' dtype (the weight pass's SUMMA partial sums travel in it); the dtype if absent.
  std::optional<DType> grad_dtype = std::nullopt;
};

// Throws mdtp::Error (naming the value) for a shape the layouts refuse: Geometry's divisibility,
// heads not divisible by the QKV column split, rows that are not whole sequences.
LayerCosts layer_costs(const ModelShape& model, TpMode mode, int tp, int depth, std::int64_t micro_batch, DType dtype,
                       const Cluster& cluster, const KernelOptions& options = {});
// The same for one step's configuration: its model, TP shape, micro-batch and dtype, and its
// switches (dropout, the attention kernel, engine_kernels, the gradients' dtype) as KernelOptions.
LayerCosts layer_costs(const StepConfig& config, const Cluster& cluster);

// The vocabulary units (embedding, final LayerNorm + head + cross-entropy) — vocab_costs.cpp.
struct VocabCosts {
  UnitCosts embedding, head;
  UnitKernels embedding_kernels, head_kernels;
  double embedding_params = 0.0, head_params = 0.0, wte_params = 0.0;
  double head_activation_bytes = 0.0;
  double head_logits = 0.0;
};
// engine_kernels: their streaming kernels as mdtp's engine launches them (engine_kernels.hpp).
VocabCosts vocab_costs(const ModelShape& model, const Workload& layernorm_workload, const Cluster& cluster,
                       bool engine_kernels = false);

// Each kernel's bytes and time (kernel_time.hpp: its bytes and one kernel's overhead) added to the
// unit's passes' streaming; the attention core's entries are left out (priced with its products).
void add_kernels(UnitCosts& unit, const UnitKernels& kernels, const Cluster& cluster);

// Time and logical bytes of a list of collectives on a topology (added to a PassCost's comm).
void add_calls(PassCost& pass, const std::vector<PlannedCall>& calls, const Topology& topology, const TimeModel& model);

}  // namespace mdtp::cost
