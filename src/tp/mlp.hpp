#pragma once
// The transformer MLP written once against the mode interface: Linear(H → k·F) → activation →
// Linear(F → H).  In 1D this is Megatron's column → row pair; in 3D the two Linears flip the
// layout parity and back.
//
// The activation is GPT-2's GeLU (k = 1, the backend's kernel) unless the owner passes another: a
// gated one (Llama's SwiGLU, k = 2) reads the gate and up projections from ONE fused fc1 whose
// stored columns the owner orders so that every rank's column shard is [its gate columns | its up
// columns] (model/fused_columns.hpp) — one Linear, so its collectives are those of one matrix of
// width 2F, as Megatron fuses them.
#include <memory>

#include "tp/mode.hpp"

namespace mdtp {

// What the MLP keeps for one micro-batch: its two Linears' and the activation's input (fc1's output).
struct MlpSaved {
  LinearSaved fc1, fc2;
  Tensor pre_activation;
};

// The element-wise function between the Linears, on this rank's shard of fc1's output.
class MlpActivation {
 public:
  virtual ~MlpActivation() = default;
  // fc1's output columns per output column: 1, or 2 for a gated activation.
  virtual int fc1_width_factor() const = 0;
  // y [rows, c] from pre [rows, factor·c].
  virtual void forward(const Tensor& pre, Tensor& y) const = 0;
  // dpre [rows, factor·c] from pre and dy [rows, c].
  virtual void backward(const Tensor& pre, const Tensor& dy, Tensor& dpre) const = 0;
};

class Mlp {
 public:
  // draw_initial_values: LinearSpec's (false when the owner initialises the parameters itself).
  // activation null: GeLU; else it must outlive the MLP.  bias false: Linears without biases.
  Mlp(const TensorParallelMode& mode, const std::string& name, std::int64_t hidden, std::int64_t ffn_hidden,
      const Layout& input, bool draw_initial_values = true, const MlpActivation* activation = nullptr,
      bool bias = true, const std::string& fc1_name = "c_fc", const std::string& fc2_name = "c_proj");
  Tensor forward(const Tensor& x, MlpSaved& saved);
  // B: fc2's, the activation's and fc1's input gradients; W: fc2's then fc1's weight gradients.
  Tensor backward_input(const Tensor& dy, MlpSaved& saved);
  void backward_weight(MlpSaved& saved);
  Tensor backward(const Tensor& dy, MlpSaved& saved);
  std::vector<Parameter*> parameters();
  const Layout& output_layout() const { return fc2_->output_layout(); }
  Linear& fc1() { return *fc1_; }
  Linear& fc2() { return *fc2_; }

 private:
  const Backend& backend_;
  const MlpActivation* activation_;
  std::unique_ptr<Linear> fc1_, fc2_;
};

}  // namespace mdtp
