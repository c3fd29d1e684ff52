#pragma once
// The transformer MLP written once against the mode interface: Linear(H → 4H) → GeLU →
// Linear(4H → H).  In 1D this is Megatron's column → row pair; in 3D the two Linears flip the
// layout parity and back.
#include <memory>

#include "tp/mode.hpp"

namespace mdtp {

// What the MLP keeps for one micro-batch: its two Linears' and the GeLU input (fc1's output).
struct MlpSaved {
  LinearSaved fc1, fc2;
  Tensor pre_activation;
};

class Mlp {
 public:
  // draw_initial_values: LinearSpec's (false when the owner initialises the parameters itself).
  Mlp(const TensorParallelMode& mode, const std::string& name, std::int64_t hidden, std::int64_t ffn_hidden,
      const Layout& input, bool draw_initial_values = true);
  Tensor forward(const Tensor& x, MlpSaved& saved);
  // B: fc2's, GeLU's and fc1's input gradients; W: fc2's then fc1's weight gradients.
  Tensor backward_input(const Tensor& dy, MlpSaved& saved);
  void backward_weight(MlpSaved& saved);
  Tensor backward(const Tensor& dy, MlpSaved& saved);
  std::vector<Parameter*> parameters();
  const Layout& output_layout() const { return fc2_->output_layout(); }
  Linear& fc1() { return *fc1_; }
  Linear& fc2() { return *fc2_; }

 private:
  const Backend& backend_;
  std::unique_ptr<Linear> fc1_, fc2_;
};

}  // namespace mdtp
