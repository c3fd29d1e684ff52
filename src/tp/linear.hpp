#pragma once
// Linear: Y = X·W + b, the layer every mode implements differently.  A model is written against
// this interface; the mode decides how X, W, b and Y are sharded (their Layouts) and which
// collectives run.
//
// LinearBase holds what all modes share — parameters, bias handling (add after the product, bias
// gradient = column sums of dY, partial over the rows' groups), shape checks against the input
// layout, phase tags — so a mode only writes its product (matmul_forward) and its two backward
// products (matmul_backward).
#include <memory>
#include <string>
#include <vector>

#include "tp/context.hpp"
#include "tp/parameter.hpp"

namespace mdtp {

struct LinearSpec {
  std::string name;  // e.g. "h.0.mlp.c_fc"; parameters are name + ".weight" / ".bias"
  std::int64_t in_features = 0;
  std::int64_t out_features = 0;
  bool bias = true;
  InitSpec weight_init{};
  InitSpec bias_init{InitSpec::Kind::constant, 0.0, 0.0};
};

class Linear {
 public:
  virtual ~Linear() = default;
  // x: this rank's shard of [B, in] in input_layout(); returns the shard of [B, out].
  virtual Tensor forward(const Tensor& x) = 0;
  // dy: shard of dL/dY in output_layout(); returns dL/dX in input_layout() and accumulates the
  // (possibly partial, see Parameter) gradients of W and b.
  virtual Tensor backward(const Tensor& dy) = 0;
  virtual std::vector<Parameter*> parameters() = 0;
  virtual const Layout& input_layout() const = 0;
  virtual const Layout& output_layout() const = 0;
  virtual const LinearSpec& spec() const = 0;
};

class LinearBase : public Linear {
 public:
  Tensor forward(const Tensor& x) final;
  Tensor backward(const Tensor& dy) final;
  std::vector<Parameter*> parameters() override;
  const Layout& input_layout() const override { return input_layout_; }
  const Layout& output_layout() const override { return output_layout_; }
  const LinearSpec& spec() const override { return spec_; }

 protected:
  // `weight_layout` shards W [in, out]; `tp_axes` are the mode's TP groups (replication is derived
  // from them); `weight_partial_over` lists groups where dW is left partial (2.5D: tp.dep).
  LinearBase(const TpContext& ctx, LinearSpec spec, Layout input_layout, Layout output_layout,
             Layout weight_layout, const std::vector<std::string>& tp_axes,
             std::vector<std::string> weight_partial_over = {});

  // The mode's algorithm: Y (without bias) from X, and dX from dY while accumulating W.grad.
  virtual Tensor matmul_forward(const Tensor& x) = 0;
  virtual Tensor matmul_backward(const Tensor& dy) = 0;

  const TpContext& ctx() const { return ctx_; }
  Parameter& weight() { return weight_; }
  // Rows of this rank's input shard in the last forward (for shape checks of backward).
  std::int64_t last_rows() const { return last_rows_; }

 private:
  TpContext ctx_;
  LinearSpec spec_;
  Layout input_layout_, output_layout_;
  Parameter weight_, bias_;
  std::int64_t last_rows_ = -1;
  std::int64_t expected_out_cols_ = 0, expected_in_cols_ = 0;
};

// Groups in `all` that are not in `used`, as the one mesh group spanning them ("" if none).
std::string complement_group(const std::vector<std::string>& all, const std::vector<std::string>& used);

}  // namespace mdtp
