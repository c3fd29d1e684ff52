#pragma once
// TensorParallelMode: the factory a model is written against.  It names the layout of the
// residual stream, the mode's TP axes, and builds the layers; the model never asks which mode it
// runs in.  The modes (mesh/tp_mode.hpp) are built by modes/registry.hpp, which sits above them.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mesh/tp_mode.hpp"
#include "tp/layernorm.hpp"
#include "tp/linear.hpp"

namespace mdtp {

class TensorParallelMode {
 public:
  explicit TensorParallelMode(const TpContext& ctx) : ctx_(ctx) {}
  virtual ~TensorParallelMode() = default;

  virtual TpMode kind() const = 0;
  std::string name() const { return tp_mode_name(kind()); }
  // Layout of activations [B, H] between blocks (where LayerNorm and residual adds happen).
  virtual Layout residual_layout() const = 0;
  // The mode's TP groups; every other group a parameter is replicated over is derived from them.
  virtual std::vector<std::string> tp_axes() const = 0;
  // A Linear consuming activations in `input`; its output_layout() says what it produces.
  virtual std::unique_ptr<Linear> linear(const LinearSpec& spec, const Layout& input) const = 0;

  std::unique_ptr<LayerNorm> layernorm(const std::string& name, std::int64_t hidden, const Layout& input,
                                       double eps = 1e-5, LayerNorm::Kind kind = LayerNorm::Kind::layer) const;
  const TpContext& context() const { return ctx_; }

 protected:
  TpContext ctx_;
};

// Throws unless `actual` is `expected` (a layer fed the wrong layout).
void require_layout(const Layout& actual, const Layout& expected, const std::string& who);

}  // namespace mdtp
