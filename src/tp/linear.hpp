#pragma once
// Linear: Y = X·W + b, the layer every mode implements differently.  A model is written against
// this interface; the mode decides how X, W, b and Y are sharded (their Layouts) and which
// collectives run.
//
// LinearBase holds what all modes share — parameters, bias handling (add after the product, bias
// gradient = column sums of dY in the weight pass, partial over the rows' groups), shape and
// order checks of the per-micro-batch state — so a mode only writes its three products.
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
  // false: the owner writes every value itself afterwards (a model's initialize() with its own
  // InitSpec and column order), so the parameters are only allocated, never drawn twice.
  bool draw_initial_values = true;
};

// What one Linear keeps for one micro-batch, from forward to backward: filled by forward, read
// and partly replaced by backward_input, released by backward_weight.  The caller owns one per
// (layer, micro-batch), so any number of micro-batches can be in flight through one layer object.
// Which tensors a mode keeps is documented with the mode (tp1d/, tp2d/, tp3d/); W needs only what
// is here, never the weight values (every dW is Xᵀ·dY).
struct LinearSaved {
  enum class Stage { empty, forward_done, input_done };
  Stage stage = Stage::empty;
  std::int64_t rows = -1;  // rows of the input shard forward received
  Tensor x;                // X as W needs it: this rank's shard, or (3D keep) the gathered X(j,k)
  Tensor w;                // 3D keep: the gathered W(k,i), for backward_input
  Tensor dy;               // kept by backward_input: this rank's dY shard (bias gradient)
  Tensor dy_gathered;      // kept by backward_input where the mode gathers dY (1D-SP row, 3D)
};

// What one Linear's passes allocate in the `activations` category besides their results (Y in
// forward, dX in backward-input: activations in every mode), whether its weight pass holds on to
// the dY it was given, and over how many ranks backward-input gathers dY and keeps the gathered
// tensor for the weight pass.  Each mode's Linear says this of itself, so the memory model
// (model/activation_timeline.hpp) never asks which mode it runs under.
struct LinearActivationAllocs {
  // The weight pass reads the incoming dY itself; a Linear that keeps a gathered copy (in
  // `communication`) instead lets the dY it was given die with its holder.
  bool keeps_dy = true;
  // Partial products over the full token rows held until a reduce-scatter has filled the result:
  // a forward's (before Y) and a backward-input's (before dX).
  std::int64_t forward_partial_bytes = 0, input_grad_partial_bytes = 0;
  // The factor by which the kept dY grows: the ranks dY is gathered over (1: not gathered).
  std::int64_t dy_gather = 1;
};

class Linear {
 public:
  virtual ~Linear() = default;
  // x: this rank's shard of [B, in] in input_layout(); returns the shard of [B, out] and fills
  // `saved` (which must be empty).
  virtual Tensor forward(const Tensor& x, LinearSaved& saved) = 0;
  // B: dy is the shard of dL/dY in output_layout(); returns dL/dX in input_layout(), with the
  // collectives dX needs.  Keeps in `saved` what backward_weight needs.
  virtual Tensor backward_input(const Tensor& dy, LinearSaved& saved) = 0;
  // W: accumulates the (possibly partial, see Parameter) gradients of W and b, with the
  // collectives they need, into the parameters' grad tensors, then empties `saved`.  Reads no
  // weight values, so it may run after the weights were freed or changed (ZeRO-3, zero bubble).
  virtual void backward_weight(LinearSaved& saved) = 0;
  // B then W.
  Tensor backward(const Tensor& dy, LinearSaved& saved);
  virtual std::vector<Parameter*> parameters() = 0;
  virtual const Layout& input_layout() const = 0;
  virtual const Layout& output_layout() const = 0;
  virtual const LinearSpec& spec() const = 0;
  // What the passes of one micro-batch of `tokens` rows (b · T) allocate beside Y and dX.
  virtual LinearActivationAllocs activation_allocs(std::int64_t tokens) const = 0;
};

class LinearBase : public Linear {
 public:
  Tensor forward(const Tensor& x, LinearSaved& saved) final;
  Tensor backward_input(const Tensor& dy, LinearSaved& saved) final;
  void backward_weight(LinearSaved& saved) final;
  std::vector<Parameter*> parameters() override;
  const Layout& input_layout() const override { return input_layout_; }
  const Layout& output_layout() const override { return output_layout_; }
  const LinearSpec& spec() const override { return spec_; }
  // A Linear that neither gathers dY nor holds partial products: keeps the dY it was given.
  LinearActivationAllocs activation_allocs(std::int64_t tokens) const override;

 protected:
  // `weight_layout` shards W [in, out]; `tp_axes` are the mode's TP groups (replication is derived
  // from them); `weight_partial_over` lists groups where dW is left partial (2.5D: tp.dep).
  LinearBase(const TpContext& ctx, LinearSpec spec, Layout input_layout, Layout output_layout,
             Layout weight_layout, const std::vector<std::string>& tp_axes,
             std::vector<std::string> weight_partial_over = {});

  // The mode's algorithm, in three parts:
  //   matmul_forward   Y (without bias) from X; keeps in saved.x (and saved.w) what it needs;
  //   input_gradient   dX from dY (saved.dy is set); may replace saved.dy by a view of a gathered
  //                    dY it keeps in saved.dy_gathered for weight_gradient;
  //   weight_gradient  W.grad += Xᵀ·dY from saved.x and saved.dy / saved.dy_gathered.
  virtual Tensor matmul_forward(const Tensor& x, LinearSaved& saved) = 0;
  virtual Tensor input_gradient(const Tensor& dy, LinearSaved& saved) = 0;
  virtual void weight_gradient(LinearSaved& saved) = 0;

  const TpContext& ctx() const { return ctx_; }
  Parameter& weight() { return weight_; }

 private:
  TpContext ctx_;
  LinearSpec spec_;
  Layout input_layout_, output_layout_;
  Parameter weight_, bias_;
  std::int64_t expected_out_cols_ = 0, expected_in_cols_ = 0;
};

// Groups in `all` that are not in `used`, as the one mesh group spanning them ("" if none).
std::string complement_group(const std::vector<std::string>& all, const std::vector<std::string>& used);

}  // namespace mdtp
