#pragma once
// Llama's gated activation for the MLP (tp/mlp.hpp): silu(gate) ∘ up on the [gate | up] halves of
// this rank's fc1 shard, through the model's kernels (GptKernels::swiglu_*).
#include "model/gpt_kernels.hpp"
#include "tp/mlp.hpp"

namespace mdtp {

class SwiGlu final : public MlpActivation {
 public:
  explicit SwiGlu(const GptKernels& kernels) : kernels_(kernels) {}
  int fc1_width_factor() const override { return 2; }
  void forward(const Tensor& pre, Tensor& y) const override { kernels_.swiglu_forward(pre, y); }
  void backward(const Tensor& pre, const Tensor& dy, Tensor& dpre) const override {
    kernels_.swiglu_backward(pre, dy, dpre);
  }

 private:
  const GptKernels& kernels_;
};

}  // namespace mdtp
