#pragma once
// Training ops beyond the Backend interface, on a CudaBackend's stream: row softmax (optionally
// causal) and its backward, cross-entropy over whole rows of logits with device int32 targets, and
// AdamW with fp32 master weights for bf16/f16 parameters.  The Backend's own training ops
// (embedding, attention, vocabulary-parallel xent_*, same-dtype adamw_update) are CudaBackend
// overrides; the host backend has no counterpart of these free functions yet (a later issue).
#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/device_indices.hpp"

namespace mdtp {

// y = softmax over each row of x (last dimension).  causal: x is [..., Tq, Tk] attention scores
// and query q (the last Tq of Tk positions) sees keys j <= q + Tk - Tq; masked entries are 0.
// y may alias x.
void softmax_rows(const CudaBackend& backend, const Tensor& x, Tensor& y, bool causal = false);
// dx = y * (dy - rowsum(dy * y)), from the softmax output y.  dx may alias dy.
void softmax_rows_backward(const CudaBackend& backend, const Tensor& y, const Tensor& dy, Tensor& dx);

// Per row i of logits [N, V]: lse[i] = log sum_j exp(logits[i, j]) and
// losses[i] = lse[i] - logits[i, targets[i]], both f64 [N] whatever the logits' dtype.
// A negative target marks an ignored row (loss 0); a target >= V gives a NaN loss.
void cross_entropy_forward(const CudaBackend& backend, const Tensor& logits,
                           const DeviceIndices& targets, Tensor& losses, Tensor& lse);
// dlogits = scale * (softmax(logits) - onehot(targets)), 0 on ignored rows; scale is the
// upstream gradient of each row's loss (1/N for a mean).  dlogits may alias logits.
void cross_entropy_backward(const CudaBackend& backend, const Tensor& logits,
                            const DeviceIndices& targets, const Tensor& lse, double scale,
                            Tensor& dlogits);

// One AdamW step (Backend::adamw_update's semantics and arithmetic: AdamWStep, PyTorch AdamW)
// on a parameter and its state.  Combinations:
//   param f32 or f64: m, v of the same dtype; master undefined (param is updated in place) or
//                     of the same dtype;
//   param bf16/f16:   master, m, v f32 (master weights), param = round(master) afterwards.
// f16 moments are refused with the reason (f16 cannot hold v = (1-beta2)·g² for small gradients).
// grad has param's dtype (or f32 for 16-bit params) and is multiplied by step.grad_scale first.
void adamw_update(const CudaBackend& backend, Tensor& param, const Tensor& grad, Tensor& master,
                  Tensor& m, Tensor& v, const AdamWStep& step);

}  // namespace mdtp
