#include "bench/layer_under_test.hpp"

#include "tp/mlp.hpp"

namespace mdtp::bench {
namespace {

class LinearUnderTest final : public LayerUnderTest {
 public:
  LinearUnderTest(const TensorParallelMode& mode, const cost::Workload& w)
      : layer_(mode.linear(LinearSpec{"bench.linear", w.hidden, w.ffn_hidden}, mode.residual_layout())) {}
  Tensor forward(const Tensor& x) override { return layer_->forward(x, saved_); }
  Tensor backward(const Tensor& dy) override { return layer_->backward(dy, saved_); }
  std::vector<Parameter*> parameters() override { return layer_->parameters(); }
  Layout input_layout() const override { return layer_->input_layout(); }
  Layout output_layout() const override { return layer_->output_layout(); }
  std::int64_t in_features() const override { return layer_->spec().in_features; }
  std::int64_t out_features() const override { return layer_->spec().out_features; }

 private:
  std::unique_ptr<Linear> layer_;
  LinearSaved saved_;  // the bench has one micro-batch in flight
};

class LayerNormUnderTest final : public LayerUnderTest {
 public:
  LayerNormUnderTest(const TensorParallelMode& mode, const cost::Workload& w)
      : layer_(mode.layernorm("bench.ln", w.hidden, mode.residual_layout())), hidden_(w.hidden) {}
  Tensor forward(const Tensor& x) override { return layer_->forward(x, saved_); }
  Tensor backward(const Tensor& dy) override { return layer_->backward(dy, saved_); }
  std::vector<Parameter*> parameters() override { return layer_->parameters(); }
  Layout input_layout() const override { return layer_->layout(); }
  Layout output_layout() const override { return layer_->layout(); }
  std::int64_t in_features() const override { return hidden_; }
  std::int64_t out_features() const override { return hidden_; }

 private:
  std::unique_ptr<LayerNorm> layer_;
  LayerNormSaved saved_;
  std::int64_t hidden_;
};

class MlpUnderTest final : public LayerUnderTest {
 public:
  MlpUnderTest(const TensorParallelMode& mode, const cost::Workload& w)
      : layer_(mode, "bench.mlp", w.hidden, w.ffn_hidden, mode.residual_layout()),
        input_(mode.residual_layout()), hidden_(w.hidden) {}
  Tensor forward(const Tensor& x) override { return layer_.forward(x, saved_); }
  Tensor backward(const Tensor& dy) override { return layer_.backward(dy, saved_); }
  std::vector<Parameter*> parameters() override { return layer_.parameters(); }
  Layout input_layout() const override { return input_; }
  Layout output_layout() const override { return layer_.output_layout(); }
  std::int64_t in_features() const override { return hidden_; }
  std::int64_t out_features() const override { return hidden_; }

 private:
  Mlp layer_;
  MlpSaved saved_;
  Layout input_;
  std::int64_t hidden_;
};

}  // namespace

const std::vector<std::string>& layer_kinds() {
  static const std::vector<std::string> kinds{"linear", "layernorm", "mlp"};
  return kinds;
}

std::unique_ptr<LayerUnderTest> make_layer_under_test(const TensorParallelMode& mode, const cost::Workload& w) {
  require(w.hidden > 0, "the layer needs a positive hidden size; got hidden=", w.hidden);
  if (w.layer == "linear") {
    require(w.ffn_hidden > 0, "the linear layer needs a positive output size (--ffn); got ", w.ffn_hidden);
    return std::make_unique<LinearUnderTest>(mode, w);
  }
  if (w.layer == "layernorm") return std::make_unique<LayerNormUnderTest>(mode, w);
  if (w.layer == "mlp") {
    require(w.ffn_hidden > 0, "the MLP needs a positive inner size (--ffn); got ", w.ffn_hidden);
    return std::make_unique<MlpUnderTest>(mode, w);
  }
  throw_error("unknown layer '", w.layer, "'; expected linear, layernorm or mlp");
}

}  // namespace mdtp::bench
