#include "tp/serial_mode.hpp"

namespace mdtp {
namespace {

class SerialLinear final : public LinearBase {
 public:
  SerialLinear(const TpContext& ctx, const LinearSpec& spec, const Layout& full)
      : LinearBase(ctx, spec, full, full, full, {}) {}

 protected:
  Tensor matmul_forward(const Tensor& x) override {
    x_ = x;
    Tensor y = ctx().backend.empty({x.rows(), spec().out_features}, x.dtype(), MemCategory::activations);
    ctx().backend.gemm(false, false, 1.0, x, weight().value, 0.0, y);
    return y;
  }
  Tensor matmul_backward(const Tensor& dy) override {
    const Backend& be = ctx().backend;
    be.gemm(true, false, 1.0, x_, dy, 1.0, weight().grad);
    Tensor dx = be.empty({dy.rows(), spec().in_features}, dy.dtype(), MemCategory::activations);
    be.gemm(false, true, 1.0, dy, weight().value, 0.0, dx);
    return dx;
  }

 private:
  Tensor x_;
};

}  // namespace

std::unique_ptr<Linear> SerialMode::linear(const LinearSpec& spec, const Layout& input) const {
  require_layout(input, residual_layout(), spec.name);
  return std::make_unique<SerialLinear>(ctx_, spec, input);
}

}  // namespace mdtp
