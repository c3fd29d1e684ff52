// CudaBackend: validation (same messages as the host backend), then one kernel launch or one
// cuBLAS call on the backend's stream.  GEMM is in cuda_gemm.cpp.
#include "cuda/cuda_backend.hpp"

#include "cuda/cuda_check.hpp"
#include "cuda/cuda_kernels.hpp"
#include "cuda/host_convert.hpp"

namespace mdtp {
namespace {

void require_same_dtype(const Tensor& a, const Tensor& b, const char* what) {
  require(a.dtype() == b.dtype(), what, ": mixed dtypes ", dtype_name(a.dtype()), " and ",
          dtype_name(b.dtype()));
}

void require_stats(const Tensor& t, std::int64_t rows, const char* what) {
  require_device_tensor(t, what);
  require(t.dtype() == DType::f64 && t.rows() == rows && t.cols() == 2, what,
          " must be f64 [", rows, ", 2]; got ", dtype_name(t.dtype()), " ", shape_string(t.shape()));
}

void require_numel(const Tensor& t, std::int64_t n, const char* what) {
  require(t.numel() == n, what, " has ", t.numel(), " elements (shape ", shape_string(t.shape()),
          "); expected ", n);
}

}  // namespace

void require_device_tensor(const Tensor& t, const char* what) {
  require(t.defined(), what, " is undefined");
  require(t.device() == DeviceKind::cuda, what, " lives on ", device_name(t.device()),
          "; the CUDA backend needs device tensors");
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
}

CudaBackend::~CudaBackend() {
  if (stream_) cuda_ok_in_destructor(cudaStreamSynchronize(stream_.get()), "cudaStreamSynchronize");
}

void CudaBackend::synchronize() const { MDTP_CUDA_CHECK(cudaStreamSynchronize(stream())); }

std::vector<double> CudaBackend::to_f64(const Tensor& t) const {
  require_device_tensor(t, "to_f64 source");
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

void CudaBackend::assign_f64(Tensor& t, const std::vector<double>& values) const {
  require_device_tensor(t, "assign_f64 target");
  require(static_cast<std::int64_t>(values.size()) == t.numel(), "assign_f64: ", values.size(),
          " values for shape ", shape_string(t.shape()));
  if (values.empty()) return;
  std::vector<unsigned char> staging(t.bytes());
  convert_host(DType::f64, values.data(), t.dtype(), staging.data(), values.size());
  MDTP_CUDA_CHECK(cudaMemcpyAsync(t.raw_data(), staging.data(), t.bytes(), cudaMemcpyHostToDevice, stream()));
  synchronize();  // the staging buffer dies here
}

void CudaBackend::fill(Tensor& t, double value) const {
  require_device_tensor(t, "fill target");
  kernels::fill(t.dtype(), t.raw_data(), t.numel(), value, stream());
}

void CudaBackend::copy(const Tensor& src, Tensor& dst) const {
  require_device_tensor(src, "copy source");
  require_device_tensor(dst, "copy target");
  require_same_dtype(src, dst, "copy");
  require(src.numel() == dst.numel(), "copy of ", shape_string(src.shape()), " into ",
          shape_string(dst.shape()));
  if (src.raw_data() != dst.raw_data() && src.bytes() > 0)
    MDTP_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), src.bytes(), cudaMemcpyDeviceToDevice, stream()));
}

void CudaBackend::convert(const Tensor& src, Tensor& dst) const {
  require_device_tensor(src, "convert source");
  require_device_tensor(dst, "convert target");
  require(src.numel() == dst.numel(), "convert of ", shape_string(src.shape()), " into ",
          shape_string(dst.shape()));
  if (src.dtype() == dst.dtype()) return copy(src, dst);
  kernels::convert(src.dtype(), src.raw_data(), dst.dtype(), dst.raw_data(), src.numel(), stream());
}

void CudaBackend::copy_block(const Tensor& src, std::int64_t sr0, std::int64_t sc0, Tensor& dst,
                             std::int64_t dr0, std::int64_t dc0, std::int64_t rows,
                             std::int64_t cols) const {
  require_device_tensor(src, "copy_block source");
  require_device_tensor(dst, "copy_block target");
  require_same_dtype(src, dst, "copy_block");
  require(rows >= 0 && cols >= 0, "copy_block: negative block ", rows, "x", cols);
  require(sr0 >= 0 && sc0 >= 0 && sr0 + rows <= src.rows() && sc0 + cols <= src.cols(),
          "copy_block: source block out of range");
  require(dr0 >= 0 && dc0 >= 0 && dr0 + rows <= dst.rows() && dc0 + cols <= dst.cols(),
          "copy_block: target block out of range");
  if (rows == 0 || cols == 0) return;
  const auto es = static_cast<std::int64_t>(dtype_size(src.dtype()));
  const char* s = static_cast<const char*>(src.raw_data()) + (sr0 * src.cols() + sc0) * es;
  char* d = static_cast<char*>(dst.raw_data()) + (dr0 * dst.cols() + dc0) * es;
  // A strided 2-D copy is one DMA: no kernel needed.
  MDTP_CUDA_CHECK(cudaMemcpy2DAsync(d, static_cast<std::size_t>(dst.cols() * es), s,
                                    static_cast<std::size_t>(src.cols() * es),
                                    static_cast<std::size_t>(cols * es), static_cast<std::size_t>(rows),
                                    cudaMemcpyDeviceToDevice, stream()));
}

void CudaBackend::axpy(double alpha, const Tensor& x, Tensor& y) const {
  require_device_tensor(x, "axpy x");
  require_device_tensor(y, "axpy y");
  require_same_dtype(x, y, "axpy");
  require(x.numel() == y.numel(), "axpy of ", shape_string(x.shape()), " into ", shape_string(y.shape()));
  kernels::axpy(x.dtype(), alpha, x.raw_data(), y.raw_data(), x.numel(), stream());
}

void CudaBackend::scale(Tensor& x, double alpha) const {
  require_device_tensor(x, "scale target");
  kernels::scale(x.dtype(), x.raw_data(), x.numel(), alpha, stream());
}

void CudaBackend::add_row_vector(Tensor& y, const Tensor& row) const {
  require_device_tensor(y, "add_row_vector target");
  require_device_tensor(row, "add_row_vector row");
  require_same_dtype(y, row, "add_row_vector");
  require(row.numel() == y.cols(), "add_row_vector: row of ", row.numel(), " elements for ", y.cols(),
          " columns");
  kernels::add_row_vector(y.dtype(), y.raw_data(), row.raw_data(), y.rows(), y.cols(), stream());
}

void CudaBackend::column_sums(const Tensor& x, Tensor& out, double beta) const {
  require_device_tensor(x, "column_sums source");
  require_device_tensor(out, "column_sums target");
  require_same_dtype(x, out, "column_sums");
  require(out.numel() == x.cols(), "column_sums: ", out.numel(), " outputs for ", x.cols(), " columns");
  kernels::column_sums(x.dtype(), x.raw_data(), out.raw_data(), x.rows(), x.cols(), beta, stream());
}

double CudaBackend::sum_squares(const Tensor& x) const {
  require_device_tensor(x, "sum_squares source");
  Tensor workspace = empty({kernels::kReduceParts + 1}, DType::f64, MemCategory::other);
  auto* w = workspace.data<double>();
  kernels::sum_squares(x.dtype(), x.raw_data(), x.numel(), w, stream());
  double result = 0.0;
  MDTP_CUDA_CHECK(cudaMemcpyAsync(&result, w + kernels::kReduceParts, sizeof(double),
                                  cudaMemcpyDeviceToHost, stream()));
  synchronize();
  return result;
}

void CudaBackend::gelu_forward(const Tensor& x, Tensor& y) const {
  require_device_tensor(x, "gelu x");
  require_device_tensor(y, "gelu y");
  require_same_dtype(x, y, "gelu");
  require(x.numel() == y.numel(), "gelu: output shape ", shape_string(y.shape()), " for input ",
          shape_string(x.shape()));
  kernels::gelu_forward(x.dtype(), x.raw_data(), y.raw_data(), x.numel(), stream());
}

void CudaBackend::gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) const {
  require_device_tensor(x, "gelu x");
  require_device_tensor(dy, "gelu dy");
  require_device_tensor(dx, "gelu dx");
  require_same_dtype(x, dy, "gelu_backward");
  require_same_dtype(x, dx, "gelu_backward");
  require(x.numel() == dy.numel() && x.numel() == dx.numel(), "gelu_backward: shapes differ");
  kernels::gelu_backward(x.dtype(), x.raw_data(), dy.raw_data(), dx.raw_data(), x.numel(), stream());
}

void CudaBackend::row_mean_m2(const Tensor& x, Tensor& stats) const {
  require_device_tensor(x, "row_mean_m2 source");
  require_stats(stats, x.rows(), "row_mean_m2 statistics");
  kernels::row_mean_m2(x.dtype(), x.raw_data(), stats.data<double>(), x.rows(), x.cols(), stream());
}

void CudaBackend::merge_row_stats(const Tensor& stacked, int parts, std::int64_t count_per_part,
                                  double eps, Tensor& mean_rstd) const {
  require(parts >= 1 && count_per_part >= 1, "merge_row_stats needs parts >= 1 and count_per_part >= 1; got parts=",
          parts, ", count_per_part=", count_per_part);
  require_stats(mean_rstd, mean_rstd.rows(), "merge_row_stats output");
  require_stats(stacked, mean_rstd.rows() * parts, "merge_row_stats stacked input");
  kernels::merge_row_stats(stacked.data<double>(), parts, count_per_part, eps, mean_rstd.data<double>(),
                           mean_rstd.rows(), stream());
}

void CudaBackend::layernorm_apply(const Tensor& x, const Tensor& mean_rstd, const Tensor& gamma,
                                  const Tensor& beta, Tensor& xhat, Tensor& y) const {
  for (auto [t, what] : {std::pair{&x, "layernorm_apply x"}, {&gamma, "layernorm_apply gamma"},
                         {&beta, "layernorm_apply beta"}, {&xhat, "layernorm_apply xhat"},
                         {&y, "layernorm_apply y"}}) {
    require_device_tensor(*t, what);
    require_same_dtype(x, *t, "layernorm_apply");
  }
  require_stats(mean_rstd, x.rows(), "layernorm_apply mean_rstd");
  require(gamma.numel() == x.cols() && beta.numel() == x.cols(), "layernorm_apply: gamma/beta of ",
          gamma.numel(), " for ", x.cols(), " columns");
  require_numel(xhat, x.numel(), "layernorm_apply xhat");
  require_numel(y, x.numel(), "layernorm_apply y");
  kernels::layernorm_apply(x.dtype(), x.raw_data(), mean_rstd.data<double>(), gamma.raw_data(),
                           beta.raw_data(), xhat.raw_data(), y.raw_data(), x.rows(), x.cols(), stream());
}

void CudaBackend::layernorm_backward_sums(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
                                          Tensor& sums) const {
  for (auto [t, what] : {std::pair{&dy, "layernorm_backward_sums dy"},
                         {&xhat, "layernorm_backward_sums xhat"}, {&gamma, "layernorm_backward_sums gamma"}}) {
    require_device_tensor(*t, what);
    require_same_dtype(dy, *t, "layernorm_backward_sums");
  }
  require_numel(xhat, dy.numel(), "layernorm_backward_sums xhat");
  require_numel(gamma, dy.cols(), "layernorm_backward_sums gamma");
  require_stats(sums, dy.rows(), "layernorm_backward_sums sums");
  kernels::layernorm_backward_sums(dy.dtype(), dy.raw_data(), xhat.raw_data(), gamma.raw_data(),
                                   sums.data<double>(), dy.rows(), dy.cols(), stream());
}

void CudaBackend::layernorm_backward(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
                                     const Tensor& mean_rstd, const Tensor& sums, std::int64_t n,
                                     Tensor& dx, Tensor& dgamma, Tensor& dbeta) const {
  for (auto [t, what] : {std::pair{&dy, "layernorm_backward dy"}, {&xhat, "layernorm_backward xhat"},
                         {&gamma, "layernorm_backward gamma"}, {&dx, "layernorm_backward dx"},
                         {&dgamma, "layernorm_backward dgamma"}, {&dbeta, "layernorm_backward dbeta"}}) {
    require_device_tensor(*t, what);
    require_same_dtype(dy, *t, "layernorm_backward");
  }
  require(n >= 1, "layernorm_backward needs the full row length n >= 1; got n=", n);
  require_numel(xhat, dy.numel(), "layernorm_backward xhat");
  require_numel(dx, dy.numel(), "layernorm_backward dx");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&gamma, &dgamma, &dbeta})
    require_numel(*t, dy.cols(), "layernorm_backward gamma/dgamma/dbeta");
  require_stats(mean_rstd, dy.rows(), "layernorm_backward mean_rstd");
  require_stats(sums, dy.rows(), "layernorm_backward sums");
  require(dx.raw_data() != dy.raw_data() || dy.numel() == 0,
          "layernorm_backward: dx aliases dy; expected separate buffers");
  kernels::layernorm_backward(dy.dtype(), dy.raw_data(), xhat.raw_data(), gamma.raw_data(),
                              mean_rstd.data<double>(), sums.data<double>(), n, dx.raw_data(),
                              dgamma.raw_data(), dbeta.raw_data(), dy.rows(), dy.cols(), stream());
}

std::unique_ptr<CudaBackend> make_cuda_backend(CudaBackendOptions options) {
  return std::make_unique<CudaBackend>(options);
}

}  // namespace mdtp
