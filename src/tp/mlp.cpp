#include "tp/mlp.hpp"

namespace mdtp {

Mlp::Mlp(const TensorParallelMode& mode, const std::string& name, std::int64_t hidden, std::int64_t ffn_hidden,
         const Layout& input, bool draw_initial_values, const MlpActivation* activation, bool bias,
         const std::string& fc1_name, const std::string& fc2_name)
    : backend_(mode.context().backend), activation_(activation) {
  const int factor = activation_ ? activation_->fc1_width_factor() : 1;
  LinearSpec up{name + "." + fc1_name, hidden, factor * ffn_hidden, bias};
  up.bias_init = InitSpec{InitSpec::Kind::normal, 0.02, 0.0};
  up.draw_initial_values = draw_initial_values;
  fc1_ = mode.linear(up, input);
  if (factor > 1) {
    const Layout& out = fc1_->output_layout();
    require(out.col_groups.size() <= 1, name, ": mode ", mode.name(), " splits the MLP's fused gate/up columns over ",
            out.col_groups.size(), " groups; a gated activation needs at most one");
  }
  LinearSpec down{name + "." + fc2_name, ffn_hidden, hidden, bias};
  down.bias_init = InitSpec{InitSpec::Kind::normal, 0.02, 0.0};
  down.draw_initial_values = draw_initial_values;
  fc2_ = mode.linear(down, fc1_->output_layout());
}

Tensor Mlp::forward(const Tensor& x, MlpSaved& saved) {
  saved.pre_activation = fc1_->forward(x, saved.fc1);
  const Tensor& pre = saved.pre_activation;
  if (!activation_) {
    Tensor h = backend_.empty(pre.shape(), pre.dtype(), MemCategory::activations);
    backend_.gelu_forward(pre, h);
    return fc2_->forward(h, saved.fc2);
  }
  const int factor = activation_->fc1_width_factor();
  Tensor h = backend_.empty({pre.rows(), pre.cols() / factor}, pre.dtype(), MemCategory::activations);
  activation_->forward(pre, h);
  return fc2_->forward(h, saved.fc2);
}

Tensor Mlp::backward_input(const Tensor& dy, MlpSaved& saved) {
  require(saved.pre_activation.defined(), "MLP: backward called before forward (or twice for one micro-batch)");
  Tensor dh = fc2_->backward_input(dy, saved.fc2);
  Tensor dpre = backend_.empty(saved.pre_activation.shape(), dh.dtype(), MemCategory::activations);
  if (activation_) activation_->backward(saved.pre_activation, dh, dpre);
  else backend_.gelu_backward(saved.pre_activation, dh, dpre);
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
