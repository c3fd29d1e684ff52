#pragma once
// What the cost tests share: the real layer of a Workload, run on a ModeFixture under the phase
// tags the model predicts, with tiny shapes that every mesh of the TP issue can split.
#include <memory>
#include <string>

#include "bench/layer_under_test.hpp"
#include "cost/cost_model.hpp"
#include "model/gpt_kernels.hpp"
#include "model/swiglu.hpp"
#include "support/tp_harness.hpp"
#include "tp/mlp.hpp"

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

// The layer of a workload on a fixture (the benchmark's own LayerUnderTest, so the tests run
// exactly what `mdtp bench` runs), with inputs drawn for it.
class LayerUnderTest {
 public:
  LayerUnderTest(const ModeFixture& f, const cost::Workload& w)
      : f_(f), w_(w), layer_(bench::make_layer_under_test(*f.mode, w)) {}
  Layout input_layout() const { return layer_->input_layout(); }
  Layout output_layout() const { return layer_->output_layout(); }
  Tensor input() const { return f_.scatter(random_matrix(w_.rows, w_.hidden, 11), input_layout()); }
  Tensor output_grad() const {
    return f_.scatter(random_matrix(w_.rows, layer_->out_features(), 12), output_layout());
  }
  Tensor forward(const Tensor& x) { return layer_->forward(x); }
  Tensor backward(const Tensor& dy) { return layer_->backward(dy); }
  std::vector<Parameter*> parameters() { return layer_->parameters(); }

 private:
  const ModeFixture& f_;
  cost::Workload w_;
  std::unique_ptr<bench::LayerUnderTest> layer_;
};

// The same workload with Llama's blocks (cost/block_widths.hpp): Linears without biases, RMSNorm,
// the MLP's fused gate|up of 2F before SwiGLU.
inline cost::Workload llama_workload_for(const ModeCase& c, const std::string& layer, DType dtype,
                                         const std::string& dp_group) {
  cost::Workload w = workload_for(c, layer, dtype, false, dp_group);
  ModelShape llama;
  llama.family = ModelFamily::llama;
  llama.hidden = w.hidden;
  llama.heads = 1;
  llama.ffn_hidden = w.ffn_hidden;
  w.block = cost::block_widths(llama);
  return w;
}

// Llama's layers as the model builds them (model/block.cpp, model/attention.cpp): a Linear without
// a bias, an RMSNorm (the LayerNorm path, uncentred, γ only), the MLP with SwiGLU over one fused
// gate|up Linear and no biases.  The bench's LayerUnderTest builds GPT-2's; these are the tests'.
class LlamaLayerUnderTest {
 public:
  LlamaLayerUnderTest(const ModeFixture& f, const cost::Workload& w)
      : f_(f), w_(w), kernels_(make_host_gpt_kernels(*f.backend)), swiglu_(*kernels_) {
    const Layout residual = f.mode->residual_layout();
    if (w.layer == "layernorm") {
      norm_ = f.mode->layernorm("llama.norm", w.hidden, residual, 1e-5, LayerNorm::Kind::rms);
    } else if (w.layer == "mlp") {
      mlp_ = std::make_unique<Mlp>(*f.mode, "llama.mlp", w.hidden, w.ffn_hidden, residual, true, &swiglu_, false,
                                   "gate_up_proj", "down_proj");
    } else {
      linear_ = f.mode->linear(LinearSpec{"llama.linear", w.hidden, w.ffn_hidden, false}, residual);
    }
  }
  Layout output_layout() const {
    if (linear_) return linear_->output_layout();
    return mlp_ ? mlp_->output_layout() : norm_->layout();
  }
  Tensor input() const { return f_.scatter(random_matrix(w_.rows, w_.hidden, 11), f_.mode->residual_layout()); }
  Tensor output_grad() const {
    return f_.scatter(random_matrix(w_.rows, linear_ ? w_.ffn_hidden : w_.hidden, 12), output_layout());
  }
  Tensor forward(const Tensor& x) {
    if (linear_) return linear_->forward(x, linear_saved_);
    return mlp_ ? mlp_->forward(x, mlp_saved_) : norm_->forward(x, norm_saved_);
  }
  Tensor backward(const Tensor& dy) {
    if (linear_) return linear_->backward(dy, linear_saved_);
    return mlp_ ? mlp_->backward(dy, mlp_saved_) : norm_->backward(dy, norm_saved_);
  }
  std::vector<Parameter*> parameters() {
    if (linear_) return linear_->parameters();
    return mlp_ ? mlp_->parameters() : norm_->parameters();
  }

 private:
  const ModeFixture& f_;
  cost::Workload w_;
  std::unique_ptr<GptKernels> kernels_;
  SwiGlu swiglu_;
  std::unique_ptr<Linear> linear_;
  std::unique_ptr<Mlp> mlp_;
  std::unique_ptr<LayerNorm> norm_;
  LinearSaved linear_saved_;
  MlpSaved mlp_saved_;
  LayerNormSaved norm_saved_;
};

}  // namespace mdtp::testing
