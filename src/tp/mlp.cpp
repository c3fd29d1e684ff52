#include "tp/mlp.hpp"

namespace mdtp {

Mlp::Mlp(const TensorParallelMode& mode, const std::string& name, std::int64_t hidden, std::int64_t ffn_hidden,
         const Layout& input)
    : backend_(mode.context().backend) {
  LinearSpec up{name + ".c_fc", hidden, ffn_hidden};
  up.bias_init = InitSpec{InitSpec::Kind::normal, 0.02, 0.0};
  fc1_ = mode.linear(up, input);
  LinearSpec down{name + ".c_proj", ffn_hidden, hidden};
  down.bias_init = InitSpec{InitSpec::Kind::normal, 0.02, 0.0};
  fc2_ = mode.linear(down, fc1_->output_layout());
}

Tensor Mlp::forward(const Tensor& x) {
  pre_activation_ = fc1_->forward(x);
  Tensor h = backend_.empty(pre_activation_.shape(), pre_activation_.dtype(), MemCategory::activations);
  backend_.gelu_forward(pre_activation_, h);
  return fc2_->forward(h);
}

Tensor Mlp::backward(const Tensor& dy) {
  Tensor dh = fc2_->backward(dy);
  Tensor dpre = backend_.empty(dh.shape(), dh.dtype(), MemCategory::activations);
  backend_.gelu_backward(pre_activation_, dh, dpre);
  return fc1_->backward(dpre);
}

std::vector<Parameter*> Mlp::parameters() {
  std::vector<Parameter*> ps = fc1_->parameters();
  for (Parameter* p : fc2_->parameters()) ps.push_back(p);
  return ps;
}

}  // namespace mdtp
