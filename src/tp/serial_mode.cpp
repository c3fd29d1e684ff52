#include "tp/serial_mode.hpp"

namespace mdtp {
namespace {

class SerialLinear final : public LinearBase {
 public:
  SerialLinear(const TpContext& ctx, const LinearSpec& spec, const Layout& full)
      : LinearBase(ctx, spec, full, full, full, {}) {}

 protected:
  Tensor matmul_forward(const Tensor& x, LinearSaved& saved) override {
    saved.x = x;
    Tensor y = ctx().backend.empty({x.rows(), spec().out_features}, x.dtype(), MemCategory::activations);
    ctx().backend.gemm(false, false, 1.0, x, weight().value, 0.0, y);
    return y;
  }
  Tensor input_gradient(const Tensor& dy, LinearSaved&) override {
    Tensor dx = ctx().backend.empty({dy.rows(), spec().in_features}, dy.dtype(), MemCategory::activations);
    ctx().backend.gemm(false, true, 1.0, dy, weight().value, 0.0, dx);
    return dx;
  }
  void weight_gradient(LinearSaved& saved) override {
    ctx().backend.gemm(true, false, 1.0, saved.x, saved.dy, 1.0, weight().grad);
  }
};

}  // namespace

std::unique_ptr<Linear> SerialMode::linear(const LinearSpec& spec, const Layout& input) const {
  require_layout(input, residual_layout(), spec.name);
  return std::make_unique<SerialLinear>(ctx_, spec, input);
}

}  // namespace mdtp
