#pragma once
// What the cost tests share: the real layer of a Workload, run on a ModeFixture under the phase
// tags the model predicts, with tiny shapes that every mesh of the TP issue can split.
#include <memory>
#include <string>

#include "bench/layer_under_test.hpp"
#include "cost/cost_model.hpp"
#include "support/tp_harness.hpp"

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

}  // namespace mdtp::testing
