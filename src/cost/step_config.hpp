#pragma once
// StepConfig: one training step of a GPT-2 or Llama (docs/theory.md §7's architecture, Megatron's
// layer order) on a parallel configuration — what the whole-step model (step_model.hpp) evaluates
// and the planner (planner.hpp) enumerates.
//
//   model        layers l, hidden h, heads a (kv key/value heads), sequence s, vocabulary V, the
//                MLP's width F (GPT-2: 4h), the family (block_widths.hpp: what Llama changes)
//   batch        global batch B (sequences), micro-batch b; m = B/(b·dp) micro-batches per replica
//   parallelism  mode ∈ {1d, 1d-sp, 2d, 2.5d, 3d} on tp ranks (2.5d: depth d), pp stages with a
//                schedule (gpipe, 1f1b, interleaved with v chunks, zb-h1), dp replicas, ZeRO 0–3
//   recompute    none | selective (the attention core, Korthikanti et al. 2022) | full (every
//                layer from its input); the attention kernel is an input: one that keeps the
//                softmax probabilities (mdtp's, Megatron's unfused softmax) or a streaming kernel
//                (FlashAttention-style) that keeps no T×T matrix, with which none and selective
//                coincide — nothing to drop, nothing to recompute
//   precision    dtype of parameters and activations; gradients are reduced in grad_dtype
//                (Megatron: fp32 main gradients with bf16, the dtype with fp16), Adam keeps an
//                fp32 master copy and two moments (12 B per parameter) with a 16-bit dtype
//
// Placement (docs/theory.md §1): order tp-cp-dp-pp, ranks filled node by node, so TP groups stay
// inside a node when tp ≤ gpus_per_node, and DP and PP groups cross nodes once tp·dp or tp·dp·pp
// exceed it.
#include <algorithm>
#include <cstdint>
#include <string>

#include "core/dtype.hpp"
#include "cost/pipeline_bubble.hpp"
#include "mesh/tp_mode.hpp"
#include "plan/stage_partition.hpp"
#include "spec/run_spec.hpp"
#include "spec/recompute.hpp"

namespace mdtp::cost {

// What the engines overlap, as the step model assumes (docs/performance-model.md, "Overlap").
struct OverlapAssumptions {
  // The data-parallel gradient reduction runs in buckets during the last micro-batch's backward;
  // only what does not fit under it, and at least the last bucket, is exposed.  false: it runs
  // after backward (Megatron-LM of 2021, the Narayanan validation).
  bool dp_gradients = true;
  double bucket_bytes = 40e6;  // Megatron's default bucket (4·10⁷ elements), in bytes of grad_dtype
  // Pipeline sends and receives run beside compute: false charges each one on the critical path
  // (blocking send/recv, as Megatron-LM of 2021 and mdtp's first engine).
  bool pp_p2p = false;
  // Megatron's --tp-comm-overlap (Transformer Engine's userbuffers; it needs sequence parallelism,
  // so it applies to 1D-SP layouts only): each pass's TP all-gathers and reduce-scatters run in
  // chunks under that pass's GEMMs, and only what outlasts them is exposed.  Off, as in Megatron;
  // otherwise every layer waits on its TP collectives.
  bool tp_comm = false;
  // Megatron's --overlap-param-gather (the distributed optimizer: ZeRO-1/2 here): the updated
  // parameters' all-gather runs bucket by bucket under the next step's first forward, so only
  // what outlasts one micro-batch's forward is exposed.  Off, as in Megatron.
  bool param_gather = false;
  // Megatron's always-on overlap in 1D (LinearWithGradAccumulationAndAsyncCommunication): a
  // column-parallel layer's backward starts the input gradient's all-reduce (reduce-scatter under
  // sequence parallelism) without waiting and computes its weight gradient meanwhile, so a block's
  // backward TP collectives are exposed only beyond its weight-gradient GEMMs — where the weight
  // pass runs with the backward (GPipe, 1F1B, interleaved; the zero-bubble and DualPipe schedules
  // defer it).  false: each waits before the weight gradient (mdtp's engine, Megatron-LM of 2021).
  bool tp_backward = true;
  // A pipeline stage's backward sends its input gradient upstream as soon as the backward-input
  // pass has made it, then computes the weight gradients (mdtp's engine, pipeline/executor.cpp), so
  // the fill and drain of GPipe, 1F1B and interleaved 1F1B hold (p−1)(T_F + T_B), not
  // (p−1)(T_F + T_B + T_W).  false: the input gradient leaves after the whole backward, weight
  // gradients included (Megatron-LM: one autograd backward per stage).
  bool input_gradient_first = false;
};

// The run spec (model, batch, layout and schedule, ZeRO, recomputation, precision, dropout) plus
// what the model assumes of the engine and the kernels: the overlap and the attention kernel.
struct StepConfig {
  RunSpec spec;
  OverlapAssumptions overlap;
  // false: a streaming attention kernel keeps no probabilities (nor their dropout mask and
  // output, Korthikanti's 5as/h): the kept bytes lose that term under every policy.
  bool attention_keeps_probabilities = true;
  // Megatron's --gradient-accumulation-fusion (on by default; --no-gradient-accumulation-fusion):
  // each micro-batch's weight-gradient GEMM adds into the gradient buffer in its epilogue
  // (C = XᵀdY + C), which reads and writes the buffer (2g per element) after each wave's main loop
  // where a plain GEMM writes dW (δ); mdtp's engine accumulates the same way.  false: the GEMM writes
  // dW and a separate kernel per parameter adds it into the buffer, reading dW (δ) and reading
  // and writing the buffer (g) per element and micro-batch (Megatron-LM 2021's main_grad hook).
  bool gradient_accumulation_fusion = true;
  // Megatron's --cross-entropy-loss-fusion (off by default; --cross-entropy-fusion): one kernel
  // reads the logits twice (max, then exp-sum) and writes an fp32 softmax, and its backward reads
  // that and writes dlogits — (2δ + 4) and (4 + δ) bytes per logit.  false: Megatron's vocab-parallel
  // cross-entropy as PyTorch operations in fp32 — cast to fp32 (δ + 4), max (4), subtract the max
  // (8), exp (8), sum (4) and divide by it (8) in place, and backward scale by the loss gradient
  // (8) and cast back (4 + δ): δ + 36 and 12 + δ bytes per logit, six and two kernels.
  bool cross_entropy_fusion = false;
  // 1D TP without sequence parallelism, between pipeline stages: true, each of the t ranks sends
  // 1/t of the activation and the next stage all-gathers it over its TP group (Megatron-LM's
  // scatter/gather until March 2023, on by default; mdtp's engine).  false: every TP rank sends
  // the whole activation (Megatron-LM's --no-scatter-gather-tensors-in-pipeline, and Megatron-core
  // since it dropped the optimisation in March 2023; `--no-p2p-scatter-gather`).  Under sequence
  // parallelism, and in the other modes, each rank's activation is a shard already.
  bool p2p_scatter_gather = true;
  // Megatron's --check-for-nan-in-loss-and-grad (on by default in Megatron-core's DDP since 2023;
  // `--no-check-for-nan-in-grad`): before each bucket's reduction the norm of its gradients is taken
  // to refuse a NaN, one more read of the gradient buffer per step (step_model.cpp's
  // gradient_buffer_seconds).  Megatron-LM of 2021-2022 had no such check.
  bool grad_nan_check = true;
  // false: the streaming kernels as Megatron-LM fuses them (layer_costs.hpp), what a GPU cluster
  // running Megatron pays.  true: the blocks', the vocabulary units' and the optimizer's as mdtp's
  // own engine launches them, unfused (engine_kernels.hpp; step_model.cpp's optimizer) — what a
  // simulated cluster charges it (`--engine-kernels`).
  bool engine_kernels = false;

  int gpus() const { return spec.layout.world(); }
  // m, the micro-batches per step and replica.
  std::int64_t microbatches() const { return spec.layout.micro_batches; }
  // b = B / (dp · m), the sequences of one micro-batch.
  std::int64_t micro_batch() const { return spec.micro_batch_size(); }
  // Sets m from a micro-batch size b (the planner searches b): m = B / (dp · b).
  void set_micro_batch(std::int64_t b) {
    spec.layout.micro_batches = static_cast<int>(spec.global_batch / (std::int64_t{spec.layout.dp} * b));
  }
  // The pipeline as the schedule formulas and simulations take it (pipeline_bubble.hpp), the
  // interleaved schedule's micro-batch group N included.
  PipelineConfig pipeline() const {
    const ParallelLayout& l = spec.layout;
    return {l.pp, static_cast<int>(microbatches()), l.chunks, l.schedule, l.group_size};
  }
  // The stage split (--pp-layers, else even) and the blocks stage r holds over its chunks.
  StagePartition partition() const;
  std::int64_t stage_blocks(int stage) const;
  // Whether stage r runs the embedding (the first position) or the head (the last): stage 0 and
  // p − 1 round-robin, stage 0 both under a V, stages 0 and p − 1 both under DualPipe's mirror.
  bool holds_embedding(int stage) const;
  bool holds_head(int stage) const;
  // Whether stage r's head holds a copy of the tied wte, kept equal by the `embedding` all-reduce
  // (a tied head on another stage than the embedding).  An untied head holds its own weight
  // instead (counted with the head's parameters), and nothing is all-reduced over `embedding`.
  bool head_copies_wte(int stage) const;
  // Whether any stage's does (round-robin with pp > 1, tied).
  bool head_holds_wte_copy() const;
  // Pipelined 1D without sequence parallelism at t > 1: the one layout whose activation is whole on
  // every TP rank between stages, so that p2p_scatter_gather has a choice to make.
  bool pipeline_sends_can_scatter() const;
  // Whether a pipeline send carries 1/t of the activation, all-gathered by the next stage.
  bool pipeline_sends_scattered() const { return p2p_scatter_gather && pipeline_sends_can_scatter(); }
  // Whether the step holds Megatron's contiguous gradient buffer, whose once-per-step passes
  // (zeroed, scaled, grad_nan_check) step_model.cpp prices: ZeRO 0-1 (Megatron's DDP and its
  // distributed optimizer); stages 2-3 and ZeRO-Offload are DeepSpeed's, and engine_kernels prices
  // mdtp's engine.
  bool megatron_gradient_buffer() const { return !engine_kernels && spec.zero.stage <= 1 && !spec.zero.offload; }
  // The share of the step's micro-batches each of a stage's chunks runs: 1, or 1/2 under DualPipe
  // (each route carries half).  A stage's work per micro-batch is its blocks times this.
  double chunk_share() const { return spec.layout.stage_mapping == StageMapping::mirrored ? 0.5 : 1.0; }
  // Copies of the parameters over the stages (2 under DualPipe).
  int parameter_copies() const { return spec.layout.stage_mapping == StageMapping::mirrored ? 2 : 1; }
  // The most blocks any stage holds (every stage's, with an even split).
  std::int64_t layers_per_stage() const {
    std::int64_t most = 0;
    for (int r = 0; r < spec.layout.pp; ++r) most = std::max(most, stage_blocks(r));
    return most;
  }
  // The dtype gradients are reduced in (precision_for: fp32 under bf16, as Megatron forces
  // accumulate_allreduce_grads_in_fp32; fp16 in fp16).
  DType grad_dtype() const { return spec.precision.grad_reduce; }
  DType dtype() const { return spec.precision.params; }
  // Dropout masks are stored (one byte per element) when the model trains with dropout.
  bool dropout() const { return spec.dropout > 0; }
  // The optimizer state per parameter, K: AdamW's two moments in the state's dtype (f32 for 16-bit
  // values, else the dtype) and f32 master weights for 16-bit values — 12 bytes under bf16/f16, 8 in
  // f32, 16 in f64; SGD (mdtp's, without momentum) keeps only the masters — 4 bytes under bf16/f16,
  // none otherwise (zero/optimizer.cpp; plan/bucket_memory.cpp counts the same).
  double optimizer_bytes_per_param() const {
    const double state = is_16bit(dtype()) ? 4.0 : static_cast<double>(dtype_size(dtype()));
    const double moments = spec.optimizer.kind == OptimizerKind::adamw ? 2.0 * state : 0.0;
    return moments + (is_16bit(dtype()) ? 4.0 : 0.0);
  }
  // What recomputation actually does: selective is none with a streaming attention kernel.
  Recompute effective_recompute() const {
    return spec.recompute == Recompute::selective && !attention_keeps_probabilities ? Recompute::none
                                                                                       : spec.recompute;
  }
};


// Refuses (mdtp::Error naming the value) what no engine could run: sizes that do not divide,
// a schedule its options do not fit, a ZeRO option its stage lacks, …  Shape checks of the TP layouts
// are Geometry's (they run when the layer costs are built).
void validate(const StepConfig& config);
// The part of validate() a search checks once, before it sets any stage: ZeRO-Offload is priced as
// DeepSpeed runs it, which --engine-kernels (mdtp's engine's host path) is not.
void validate_offload_pricing(const StepConfig& config);

// "1d tp=8 pp=64 dp=6 interleaved v=2 mb=1 zero=0 recompute=full bf16" (+ " streaming-attention";
// " reduce-per-micro-batch", " keep-params" after the ZeRO stage when set)
std::string describe(const StepConfig& config);

// The ZeRO stage as tables show it: "m" appended when it reduces the gradients per micro-batch,
// "k" when it keeps the gathered parameters for the step ("3", "2m", "3mk").
std::string zero_label(const StepConfig& config);

}  // namespace mdtp::cost
