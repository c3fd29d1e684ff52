#pragma once
// The layer a benchmark step runs — a Linear, a LayerNorm or the MLP — behind one interface, built
// from a cost::Workload on any mode.  Layer names are fixed ("bench.linear", "bench.ln",
// "bench.mlp"), and parameter values depend only on (seed, name, element), so the serial
// reference built with mode "none" starts from exactly the same parameters.
//   linear     Y = X·W + b, W [hidden, ffn_hidden]
//   layernorm  Y = LayerNorm(X) over hidden
//   mlp        Y = GeLU(X·W1 + b1)·W2 + b2, W1 [hidden, ffn_hidden]
#include <memory>
#include <string>
#include <vector>

#include "cost/cost_model.hpp"
#include "tp/mode.hpp"

namespace mdtp::bench {

class LayerUnderTest {
 public:
  virtual ~LayerUnderTest() = default;
  virtual Tensor forward(const Tensor& x) = 0;
  virtual Tensor backward(const Tensor& dy) = 0;
  virtual std::vector<Parameter*> parameters() = 0;
  virtual Layout input_layout() const = 0;
  virtual Layout output_layout() const = 0;
  virtual std::int64_t in_features() const = 0;
  virtual std::int64_t out_features() const = 0;
};

// "linear" | "layernorm" | "mlp"; anything else is an mdtp::Error.  Local (no communication):
// a shape that does not divide fails on every rank alike.
std::unique_ptr<LayerUnderTest> make_layer_under_test(const TensorParallelMode& mode, const cost::Workload& w);

// The layer kinds make_layer_under_test accepts.
const std::vector<std::string>& layer_kinds();

}  // namespace mdtp::bench
