#pragma once
// The host backend's element-wise kernels on raw arrays (the Backend front has checked the
// tensors): GeLU and its derivative, and the AdamW update.  Vectorised: the arithmetic through
// Eigen's array expressions or loops the compiler vectorises, tanh through array_tanh
// (core/vector_math.hpp), in blocks that stay in L1 between the passes.
#include <cstdint>

#include "core/backend.hpp"

namespace mdtp {

// y = GeLU_tanh(x) (GPT-2's approximation); y may alias x.
template <class T>
void gelu_forward(const T* x, T* y, std::int64_t n);
// dx = dy · GeLU_tanh'(x); dx may alias dy.
template <class T>
void gelu_backward(const T* x, const T* dy, T* dx, std::int64_t n);

// One PyTorch AdamW step on n elements (decoupled decay, bias-corrected moments, gradient scaled
// by step.grad_scale first).
template <class T>
void adamw_update(T* w, const T* g, T* m, T* v, std::int64_t n, const AdamWStep& step);

}  // namespace mdtp
