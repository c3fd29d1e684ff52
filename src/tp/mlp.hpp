#pragma once
// The transformer MLP written once against the mode interface: Linear(H → 4H) → GeLU →
// Linear(4H → H).  In 1D this is Megatron's column → row pair; in 3D the two Linears flip the
// layout parity and back.
#include <memory>

#include "tp/mode.hpp"

namespace mdtp {

class Mlp {
 public:
  Mlp(const TensorParallelMode& mode, const std::string& name, std::int64_t hidden, std::int64_t ffn_hidden,
      const Layout& input);
  Tensor forward(const Tensor& x);
  Tensor backward(const Tensor& dy);
  std::vector<Parameter*> parameters();
  const Layout& output_layout() const { return fc2_->output_layout(); }
  Linear& fc1() { return *fc1_; }
  Linear& fc2() { return *fc2_; }

 private:
  const Backend& backend_;
  std::unique_ptr<Linear> fc1_, fc2_;
  Tensor pre_activation_;  // kept for GeLU's backward
};

}  // namespace mdtp
