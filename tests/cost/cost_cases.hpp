#pragma once
// What the cost tests share: the real layer of a Workload, run on a ModeFixture under the phase
// tags the model predicts, with tiny shapes that every mesh of the TP issue can split.
#include <memory>
#include <string>

#include "cost/cost_model.hpp"
#include "tp/mlp.hpp"
#include "tp_harness.hpp"

namespace mdtp::testing {

// B, H, F for a case: multiples of the mesh's row and feature units (3D fc2 needs F % q² == 0).
inline cost::Workload workload_for(const ModeCase& c, const std::string& layer, DType dtype, bool keep_3d,
                                   const std::string& dp_group) {
  cost::Workload w;
  w.mode = c.mode;
  w.mesh = c.config;
  w.layer = layer;
  w.rows = c.row_unit() * 2;
  w.hidden = c.feature_unit() * 2;
  w.ffn_hidden = c.feature_unit() * 4;
  w.dtype = dtype;
  w.options.keep_gathered_3d = keep_3d;
  w.data_parallel_group = dp_group;
  return w;
}

// The layer of a workload, built on a fixture, with forward/backward/parameters uniform.
class LayerUnderTest {
 public:
  LayerUnderTest(const ModeFixture& f, const cost::Workload& w) : f_(f), w_(w), layout_(f.mode->residual_layout()) {
    if (w.layer == "linear") {
      linear_ = f.mode->linear(LinearSpec{"lin", w.hidden, w.ffn_hidden}, layout_);
    } else if (w.layer == "layernorm") {
      layernorm_ = f.mode->layernorm("ln", w.hidden, layout_);
    } else {
      mlp_ = std::make_unique<Mlp>(*f.mode, "mlp", w.hidden, w.ffn_hidden, layout_);
    }
  }
  const Layout& input_layout() const { return layout_; }
  const Layout& output_layout() const {
    return linear_ ? linear_->output_layout() : mlp_ ? mlp_->output_layout() : layout_;
  }
  std::int64_t output_cols() const { return w_.layer == "linear" ? w_.ffn_hidden : w_.hidden; }
  Tensor input() const { return f_.scatter(random_matrix(w_.rows, w_.hidden, 11), layout_); }
  Tensor output_grad() const { return f_.scatter(random_matrix(w_.rows, output_cols(), 12), output_layout()); }
  Tensor forward(const Tensor& x) {
    return linear_ ? linear_->forward(x) : layernorm_ ? layernorm_->forward(x) : mlp_->forward(x);
  }
  Tensor backward(const Tensor& dy) {
    return linear_ ? linear_->backward(dy) : layernorm_ ? layernorm_->backward(dy) : mlp_->backward(dy);
  }
  std::vector<Parameter*> parameters() {
    return linear_ ? linear_->parameters() : layernorm_ ? layernorm_->parameters() : mlp_->parameters();
  }

 private:
  const ModeFixture& f_;
  cost::Workload w_;
  Layout layout_;
  std::unique_ptr<Linear> linear_;
  std::unique_ptr<LayerNorm> layernorm_;
  std::unique_ptr<Mlp> mlp_;
};

}  // namespace mdtp::testing
