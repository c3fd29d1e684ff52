#include "tp/mlp.hpp"

namespace mdtp {

Mlp::Mlp(const TensorParallelMode& mode, const std::string& name, std::int64_t hidden, std::int64_t ffn_hidden,
         const Layout& input, bool draw_initial_values)
    : backend_(mode.context().backend) {
  LinearSpec up{name + ".c_fc", hidden, ffn_hidden};
  up.bias_init = InitSpec{InitSpec::Kind::normal, 0.02, 0.0};
  up.draw_initial_values = draw_initial_values;
  fc1_ = mode.linear(up, input);
  LinearSpec down{name + ".c_proj", ffn_hidden, hidden};
  down.bias_init = InitSpec{InitSpec::Kind::normal, 0.02, 0.0};
  down.draw_initial_values = draw_initial_values;
  fc2_ = mode.linear(down, fc1_->output_layout());
}

Tensor Mlp::forward(const Tensor& x, MlpSaved& saved) {
  saved.pre_activation = fc1_->forward(x, saved.fc1);
  Tensor h = backend_.empty(saved.pre_activation.shape(), saved.pre_activation.dtype(), MemCategory::activations);
  backend_.gelu_forward(saved.pre_activation, h);
  return fc2_->forward(h, saved.fc2);
}

Tensor Mlp::backward_input(const Tensor& dy, MlpSaved& saved) {
  require(saved.pre_activation.defined(), "MLP: backward called before forward (or twice for one micro-batch)");
  Tensor dh = fc2_->backward_input(dy, saved.fc2);
  Tensor dpre = backend_.empty(dh.shape(), dh.dtype(), MemCategory::activations);
  backend_.gelu_backward(saved.pre_activation, dh, dpre);
  saved.pre_activation = Tensor();
  return fc1_->backward_input(dpre, saved.fc1);
}

void Mlp::backward_weight(MlpSaved& saved) {
  fc2_->backward_weight(saved.fc2);
  fc1_->backward_weight(saved.fc1);
}

Tensor Mlp::backward(const Tensor& dy, MlpSaved& saved) {
  Tensor dx = backward_input(dy, saved);
  backward_weight(saved);
  return dx;
}

std::vector<Parameter*> Mlp::parameters() {
  std::vector<Parameter*> ps = fc1_->parameters();
  for (Parameter* p : fc2_->parameters()) ps.push_back(p);
  return ps;
}

}  // namespace mdtp
