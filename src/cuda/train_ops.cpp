// Validation of the training ops; the arithmetic is in train_kernels.cu.
#include "cuda/train_ops.hpp"

#include <cmath>

#include "cuda/cuda_check.hpp"
#include "cuda/cuda_kernels.hpp"

namespace mdtp {
namespace {

void require_f64_rows(const Tensor& t, std::int64_t rows, const char* what) {
  require_device_tensor(t, what);
  require(t.dtype() == DType::f64 && t.numel() == rows, what, " must be f64 with ", rows,
          " elements; got ", dtype_name(t.dtype()), " ", shape_string(t.shape()));
}

void require_like(const Tensor& t, const Tensor& like, const char* what) {
  require_device_tensor(t, what);
  require(t.dtype() == like.dtype() && t.numel() == like.numel(), what, " is ", dtype_name(t.dtype()),
          " ", shape_string(t.shape()), "; expected ", dtype_name(like.dtype()), " with ", like.numel(),
          " elements");
}

}  // namespace

void softmax_rows(const CudaBackend& backend, const Tensor& x, Tensor& y, bool causal) {
  require_device_tensor(x, "softmax x");
  require_like(y, x, "softmax y");
  std::int64_t queries = 0;
  if (causal) {
    require(x.ndim() >= 2, "causal softmax needs [..., Tq, Tk] scores; got shape ", shape_string(x.shape()));
    queries = x.dim(-2);
  }
  kernels::softmax_rows(x.dtype(), x.raw_data(), y.raw_data(), x.rows(), x.cols(), queries, backend.stream());
}

void softmax_rows_backward(const CudaBackend& backend, const Tensor& y, const Tensor& dy, Tensor& dx) {
  require_device_tensor(y, "softmax_backward y");
  require_like(dy, y, "softmax_backward dy");
  require_like(dx, y, "softmax_backward dx");
  kernels::softmax_rows_backward(y.dtype(), y.raw_data(), dy.raw_data(), dx.raw_data(), y.rows(), y.cols(), 1.0,
                                 backend.stream());
}

void cross_entropy_forward(const CudaBackend& backend, const Tensor& logits, const DeviceIndices& targets,
                           Tensor& losses, Tensor& lse) {
  require_device_tensor(logits, "cross_entropy logits");
  require(targets.size() == logits.rows(), "cross_entropy: ", targets.size(), " targets for ",
          logits.rows(), " rows of logits ", shape_string(logits.shape()));
  require(logits.cols() <= INT32_MAX, "cross_entropy: vocabulary of ", logits.cols(), " exceeds int32 targets");
  require_f64_rows(losses, logits.rows(), "cross_entropy losses");
  require_f64_rows(lse, logits.rows(), "cross_entropy lse");
  if (logits.rows() == 0) return;
  kernels::cross_entropy_forward(logits.dtype(), logits.raw_data(), targets.data(), losses.data<double>(),
                                 lse.data<double>(), logits.rows(), logits.cols(), backend.stream());
}

void cross_entropy_backward(const CudaBackend& backend, const Tensor& logits, const DeviceIndices& targets,
                            const Tensor& lse, double scale, Tensor& dlogits) {
  require_device_tensor(logits, "cross_entropy_backward logits");
  require(targets.size() == logits.rows(), "cross_entropy_backward: ", targets.size(), " targets for ",
          logits.rows(), " rows");
  require_f64_rows(lse, logits.rows(), "cross_entropy_backward lse");
  require_like(dlogits, logits, "cross_entropy_backward dlogits");
  if (logits.rows() == 0) return;
  kernels::cross_entropy_backward(logits.dtype(), logits.raw_data(), targets.data(), lse.data<double>(), scale,
                                  dlogits.raw_data(), logits.rows(), logits.cols(), backend.stream());
}

void adamw_update(const CudaBackend& backend, Tensor& param, const Tensor& grad, Tensor& master, Tensor& m,
                  Tensor& v, const AdamWStep& step) {
  require_device_tensor(param, "adamw param");
  require_device_tensor(grad, "adamw grad");
  const DType p = param.dtype();
  const DType state = is_16bit(p) ? DType::f32 : p;
  require(grad.dtype() == p || (is_16bit(p) && grad.dtype() == DType::f32), "adamw: grad is ",
          dtype_name(grad.dtype()), " for a ", dtype_name(p), " param; expected ", dtype_name(p),
          is_16bit(p) ? " or f32" : "");
  require(grad.numel() == param.numel(), "adamw: grad has ", grad.numel(), " elements for a param of ",
          param.numel());
  if (is_16bit(p))
    require(master.defined(), "adamw: a ", dtype_name(p), " param needs f32 master weights; got none");
  auto require_state = [&](const Tensor& t, const char* what) {
    require_device_tensor(t, what);
    require(t.dtype() == state && t.numel() == param.numel(), what, " is ", dtype_name(t.dtype()), " ",
            shape_string(t.shape()), "; expected ", dtype_name(state), " with ", param.numel(), " elements");
  };
  // f16 moments are named first, with the reason; any other mismatch by require_state.
  kernels::require_adamw_state(m.dtype(), "adamw m");
  kernels::require_adamw_state(v.dtype(), "adamw v");
  if (master.defined()) require_state(master, "adamw master weights");
  require_state(m, "adamw m");
  require_state(v, "adamw v");
  kernels::adamw(p, param.raw_data(), grad.dtype(), grad.raw_data(), state,
                 master.defined() ? master.raw_data() : nullptr, m.raw_data(), v.raw_data(), param.numel(),
                 kernels::adamw_scalars(step.lr, step.beta1, step.beta2, step.eps, step.weight_decay, step.step,
                                        step.grad_scale),
                 backend.stream());
}

}  // namespace mdtp
