#pragma once
// The allocator's `activations` counter through one micro-batch's passes on one rank, replayed
// from the layers' algorithms — the working set that the kept-activation model
// (activation_bytes.hpp) leaves out: the residual and gradient tensors handed between layers, each
// layer's outputs before the next layer keeps them, the partial products that die with their
// reduce-scatter, the statistics of a LayerNorm, the head's row maxima (docs/memory.md, "The
// working set").
//
// Every pass is replayed in the order the code allocates and frees: a tensor is counted from the
// moment it is allocated until its last holder lets it go (a Linear that keeps its dY holds the
// very tensor it was given, so that tensor outlives the call that made it).  Only `activations`
// tensors count: collective buffers (`communication`) and a kernel's scratch (`workspace`) are
// other counters, and so is the gathered dY that 1D-SP's row-parallel and 3D's Linears keep.
// mdtp's attention kernels materialise the probabilities, so under selective recomputation
// (KeepPolicy::attention_probabilities false) the forward allocates and drops them and the
// backward-input pass allocates them again.
//
// GPT-2 and Llama replay alike: what Llama changes — SwiGLU's output, half as wide as the gate|up
// it reads, RMSNorm's scratch row for the dβ it drops, no position rows in the embedding — comes in
// through ActivationShapes (set_block_family).
//
// The replay is of a stage that holds the whole model (no pipeline): its input is token ids (host
// vectors) and its output the loss.  With a pipeline the residual tensors handed between stages
// live until a non-blocking send completes, which depends on the peer's timing: not modelled.
#include <cstdint>

#include "model/activation_bytes.hpp"

namespace mdtp {

// One micro-batch's `activations` bytes on the rank (its context plus what its passes hold in
// hand), each pass starting where the one before ended.
struct MicroBatchActivationPeaks {
  std::int64_t forward_peak = 0, after_forward = 0;  // the forward pass, from nothing
  std::int64_t input_peak = 0, after_input = 0;      // backward-input over every unit, from after_forward
  std::int64_t fused_peak = 0;                       // backward-input and weight pass unit by unit, from after_forward
  // (A weight pass only frees: its peak is its start, after_input, and it ends at nothing.)
};

// Units 0 (the embedding), 1 … n_layer (the blocks) and n_layer + 1 (the head), one micro-batch.
MicroBatchActivationPeaks micro_batch_activation_peaks(const ActivationShapes& shapes, std::int64_t n_layer,
                                                       KeepPolicy policy);

}  // namespace mdtp
