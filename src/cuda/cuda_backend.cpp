// CudaBackend: one kernel launch or one cuBLAS call on the backend's stream per op (the Backend
// front has validated the arguments).  GEMM is in cuda_gemm.cpp.
#include "cuda/cuda_backend.hpp"

#include <algorithm>

#include "core/large_allocations.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_gemm.hpp"
#include "cuda/cuda_kernels.hpp"
#include "core/convert.hpp"

namespace mdtp {

void require_device_tensor(const Tensor& t, const char* what) {
  require(t.defined(), what, " is undefined");
  require(t.device() == DeviceKind::cuda, what, " lives on ", device_name(t.device()),
          "; the CUDA backend needs device tensors");
}

bool CudaBackend::computes_in(DType dtype) const {
  return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::bf16 || dtype == DType::f16;
}

void CudaBackend::StreamDeleter::operator()(cudaStream_t stream) const {
  cuda_ok_in_destructor(cudaStreamDestroy(stream), "cudaStreamDestroy");
}

void CudaBackend::CublasDeleter::operator()(cublasHandle_t handle) const { cublasDestroy(handle); }

CudaBackend::CudaBackend(CudaBackendOptions options)
    : Backend(std::make_shared<CudaAllocator>(options.device)), options_(options) {
  cuda_allocator_ = static_cast<CudaAllocator*>(allocator_ptr().get());
  device_ = cuda_allocator_->device_index();
  MDTP_CUDA_CHECK(cudaSetDevice(device_));
  cudaStream_t stream = nullptr;
  // Non-blocking: never implicitly ordered with the legacy default stream.
  MDTP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  stream_.reset(stream);
  cublasHandle_t handle = nullptr;
  MDTP_CUDA_CHECK(cublasCreate(&handle));
  cublas_.reset(handle);
  MDTP_CUDA_CHECK(cublasSetStream(handle, stream));
  // The handle's default matches what every GEMM sets for itself (cuda_gemm.hpp): no TF32 unless
  // asked, so that f32 results match the host backend.
  MDTP_CUDA_CHECK(cublasSetMathMode(handle, gemm_math_mode(DType::f32, options.allow_tf32)));
}

CudaBackend::~CudaBackend() {
  if (stream_) cuda_ok_in_destructor(cudaStreamSynchronize(stream_.get()), "cudaStreamSynchronize");
}

void CudaBackend::synchronize() const { MDTP_CUDA_CHECK(cudaStreamSynchronize(stream())); }

std::vector<double> CudaBackend::do_to_f64(const Tensor& t) const {
  std::vector<double> out(static_cast<std::size_t>(t.numel()));
  if (out.empty()) return out;
  if (t.dtype() == DType::f64) {
    MDTP_CUDA_CHECK(cudaMemcpyAsync(out.data(), t.raw_data(), t.bytes(), cudaMemcpyDeviceToHost, stream()));
    synchronize();
    return out;
  }
  std::vector<unsigned char> staging(t.bytes());
  MDTP_CUDA_CHECK(cudaMemcpyAsync(staging.data(), t.raw_data(), t.bytes(), cudaMemcpyDeviceToHost, stream()));
  synchronize();
  convert_host(t.dtype(), staging.data(), DType::f64, out.data(), out.size());
  return out;
}

void CudaBackend::do_assign_f64(Tensor& t, const std::vector<double>& values) const {
  if (values.empty()) return;
  std::vector<unsigned char> staging(t.bytes());
  convert_host(DType::f64, values.data(), t.dtype(), staging.data(), values.size());
  MDTP_CUDA_CHECK(cudaMemcpyAsync(t.raw_data(), staging.data(), t.bytes(), cudaMemcpyHostToDevice, stream()));
  synchronize();  // the staging buffer dies here
}

void CudaBackend::do_fill(Tensor& t, double value) const {
  kernels::fill(t.dtype(), t.raw_data(), t.numel(), value, stream());
}

void CudaBackend::do_copy(const Tensor& src, Tensor& dst) const {
  MDTP_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), src.bytes(), cudaMemcpyDeviceToDevice, stream()));
}

void CudaBackend::do_convert(const Tensor& src, Tensor& dst) const {
  kernels::convert(src.dtype(), src.raw_data(), dst.dtype(), dst.raw_data(), src.numel(), stream());
}

void CudaBackend::do_copy_block(const Tensor& src, std::int64_t sr0, std::int64_t sc0, Tensor& dst,
                             std::int64_t dr0, std::int64_t dc0, std::int64_t rows,
                             std::int64_t cols) const {
  const auto es = static_cast<std::int64_t>(dtype_size(src.dtype()));
  const char* s = static_cast<const char*>(src.raw_data()) + (sr0 * src.cols() + sc0) * es;
  char* d = static_cast<char*>(dst.raw_data()) + (dr0 * dst.cols() + dc0) * es;
  // A strided 2-D copy is one DMA: no kernel needed.
  MDTP_CUDA_CHECK(cudaMemcpy2DAsync(d, static_cast<std::size_t>(dst.cols() * es), s,
                                    static_cast<std::size_t>(src.cols() * es),
                                    static_cast<std::size_t>(cols * es), static_cast<std::size_t>(rows),
                                    cudaMemcpyDeviceToDevice, stream()));
}

void CudaBackend::do_axpy(double alpha, const Tensor& x, Tensor& y) const {
  kernels::axpy(x.dtype(), alpha, x.raw_data(), y.dtype(), y.raw_data(), x.numel(), stream());
}

void CudaBackend::do_scale(Tensor& x, double alpha) const {
  kernels::scale(x.dtype(), x.raw_data(), x.numel(), alpha, stream());
}

void CudaBackend::do_add_row_vector(Tensor& y, const Tensor& row) const {
  kernels::add_row_vector(y.dtype(), y.raw_data(), row.raw_data(), y.rows(), y.cols(), stream());
}

// The two-pass column reductions' partial sums, in the accumulation type of `data` (f64 for f64, else f32).
Tensor CudaBackend::column_workspace(DType data, std::int64_t rows, std::int64_t cols, int sums) const {
  return empty({std::max<std::int64_t>(1, kernels::column_partials(rows, cols, sums))},
               data == DType::f64 ? DType::f64 : DType::f32, MemCategory::workspace);
}

void CudaBackend::do_column_sums(const Tensor& x, Tensor& out, double beta) const {
  Tensor partials = column_workspace(x.dtype(), x.rows(), x.cols(), 1);
  kernels::column_sums(x.dtype(), x.raw_data(), out.dtype(), out.raw_data(), x.rows(), x.cols(), beta,
                       partials.raw_data(), stream());
}

double CudaBackend::do_sum_squares(const Tensor& x) const {
  Tensor workspace = empty({kernels::kReduceParts + 1}, DType::f64, MemCategory::workspace);
  auto* w = workspace.data<double>();
  kernels::sum_squares(x.dtype(), x.raw_data(), x.numel(), w, stream());
  double result = 0.0;
  MDTP_CUDA_CHECK(cudaMemcpyAsync(&result, w + kernels::kReduceParts, sizeof(double),
                                  cudaMemcpyDeviceToHost, stream()));
  synchronize();
  return result;
}

void CudaBackend::do_gelu_forward(const Tensor& x, Tensor& y) const {
  kernels::gelu_forward(x.dtype(), x.raw_data(), y.raw_data(), x.numel(), stream());
}

void CudaBackend::do_gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) const {
  kernels::gelu_backward(x.dtype(), x.raw_data(), dy.raw_data(), dx.raw_data(), x.numel(), stream());
}

void CudaBackend::do_row_mean_m2(const Tensor& x, Tensor& stats) const {
  kernels::row_mean_m2(x.dtype(), x.raw_data(), stats.data<double>(), x.rows(), x.cols(), stream());
}

void CudaBackend::do_merge_row_stats(const Tensor& stacked, int parts, std::int64_t count_per_part,
                                  double eps, Tensor& mean_rstd, bool centred) const {
  kernels::merge_row_stats(stacked.data<double>(), parts, count_per_part, eps, mean_rstd.data<double>(),
                           mean_rstd.rows(), centred, stream());
}

void CudaBackend::do_layernorm_apply(const Tensor& x, const Tensor& mean_rstd, const Tensor& gamma,
                                  const Tensor& beta, Tensor& xhat, Tensor& y) const {
  kernels::layernorm_apply(x.dtype(), x.raw_data(), mean_rstd.data<double>(), gamma.raw_data(),
                           beta.raw_data(), xhat.raw_data(), y.raw_data(), x.rows(), x.cols(), stream());
}

void CudaBackend::do_layernorm_backward_sums(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
                                          Tensor& sums, bool centred) const {
  kernels::layernorm_backward_sums(dy.dtype(), dy.raw_data(), xhat.raw_data(), gamma.raw_data(),
                                   sums.data<double>(), dy.rows(), dy.cols(), centred, stream());
}

void CudaBackend::do_layernorm_backward(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
                                     const Tensor& mean_rstd, const Tensor& sums, std::int64_t n,
                                     Tensor& dx, Tensor& dgamma, Tensor& dbeta) const {
  Tensor partials = column_workspace(dy.dtype(), dy.rows(), dy.cols(), 2);
  kernels::layernorm_backward(dy.dtype(), dy.raw_data(), xhat.raw_data(), gamma.raw_data(),
                              mean_rstd.data<double>(), sums.data<double>(), n, dx.raw_data(), dgamma.dtype(),
                              dgamma.raw_data(), dbeta.raw_data(), dy.rows(), dy.cols(), partials.raw_data(),
                              stream());
}

std::unique_ptr<CudaBackend> make_cuda_backend(CudaBackendOptions options) {
  large_allocation_policy();  // host-side MPI temporaries reused, not faulted in again (large_allocations.hpp)
  return std::make_unique<CudaBackend>(options);
}

void CudaBackend::do_adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& step) const {
  const kernels::AdamWScalars s = kernels::adamw_scalars(step.lr, step.beta1, step.beta2, step.eps,
                                                         step.weight_decay, step.step, step.grad_scale);
  const DType dt = param.dtype();
  kernels::adamw(dt, param.raw_data(), dt, grad.raw_data(), dt, nullptr, m.raw_data(), v.raw_data(), param.numel(), s,
                 stream());
}

}  // namespace mdtp
