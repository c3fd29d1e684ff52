#pragma once
// The CUDA backend: cuBLAS GEMM and the kernels of backend_kernels.cu, for device tensors of
// f32, f64, bf16 and f16 (16-bit types are storage only: fp32 arithmetic, fp32 GEMM accumulation).
// It mirrors the host backend's semantics and numerics op by op (tests/gpu compare them); the
// Backend front validates every call, so the do_* methods here only launch work.
//
// Files: cuda_backend.cpp (elementwise, reductions, LayerNorm, AdamW), cuda_gemm.cpp; the GPT
// kernels are CudaGptKernels (cuda_gpt_kernels.hpp); kernels in *.cu.
//
// All work is enqueued on one stream owned by the backend; ops return without waiting, except
// those that hand a value to the host (to_f64, sum_squares) and assign_f64, which wait for the
// stream.  Anything else that touches the backend's tensors on another stream must first be
// ordered after stream() (the NCCL communicator does this with events), because the caching
// allocator reuses freed blocks in stream order.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <memory>

#include "core/backend.hpp"
#include "cuda/cuda_allocator.hpp"

namespace mdtp {

struct CudaBackendOptions {
  int device = -1;          // -1: the current device (see select_device_for_local_rank)
  // f32 GEMM on tensor cores with TF32 inputs: ~8x faster, ~1e-3 relative error; off by default
  // so that f32 results match the host backend to 1e-5.
  bool allow_tf32 = false;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(CudaBackendOptions options = {});
  ~CudaBackend() override;

  DeviceKind device() const override { return DeviceKind::cuda; }
  const char* name() const override { return "cuda-cublas"; }
  bool computes_in(DType dtype) const override;
  int device_index() const { return device_; }
  cudaStream_t stream() const { return stream_.get(); }
  cublasHandle_t cublas() const { return cublas_.get(); }
  CudaAllocator& cuda_allocator() const { return *cuda_allocator_; }
  bool allow_tf32() const { return options_.allow_tf32; }
  void synchronize() const;  // waits for everything enqueued on stream()

 protected:
  std::vector<double> do_to_f64(const Tensor& t) const override;
  void do_assign_f64(Tensor& t, const std::vector<double>& values) const override;
  void do_fill(Tensor& t, double value) const override;
  void do_copy(const Tensor& src, Tensor& dst) const override;
  void do_copy_block(const Tensor& src, std::int64_t sr0, std::int64_t sc0, Tensor& dst,
                  std::int64_t dr0, std::int64_t dc0, std::int64_t rows,
                  std::int64_t cols) const override;
  void do_gemm(bool transpose_a, bool transpose_b, double alpha, const Tensor& a, const Tensor& b,
            double beta, Tensor& c) const override;
  void do_axpy(double alpha, const Tensor& x, Tensor& y) const override;
  void do_scale(Tensor& x, double alpha) const override;
  void do_add_row_vector(Tensor& y, const Tensor& row) const override;
  void do_column_sums(const Tensor& x, Tensor& out, double beta) const override;
  void do_convert(const Tensor& src, Tensor& dst) const override;
  double do_sum_squares(const Tensor& x) const override;
  void do_gelu_forward(const Tensor& x, Tensor& y) const override;
  void do_gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) const override;
  void do_row_mean_m2(const Tensor& x, Tensor& stats) const override;
  void do_merge_row_stats(const Tensor& stacked, int parts, std::int64_t count_per_part, double eps,
                       Tensor& mean_rstd, bool centred) const override;
  void do_layernorm_apply(const Tensor& x, const Tensor& mean_rstd, const Tensor& gamma,
                       const Tensor& beta, Tensor& xhat, Tensor& y) const override;
  void do_layernorm_backward_sums(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
                               Tensor& sums, bool centred) const override;
  void do_layernorm_backward(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
                          const Tensor& mean_rstd, const Tensor& sums, std::int64_t n, Tensor& dx,
                          Tensor& dgamma, Tensor& dbeta) const override;
  // Same-dtype AdamW (f32, f64); 16-bit parameters use the fp32-master update of train_ops.hpp.
  void do_adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& step) const override;

 private:
  // Workspace for the two-pass column reductions (bias gradients, LayerNorm's dγ and dβ).
  Tensor column_workspace(DType data, std::int64_t rows, std::int64_t cols, int sums) const;
  struct StreamDeleter {
    void operator()(cudaStream_t stream) const;
  };
  struct CublasDeleter {
    void operator()(cublasHandle_t handle) const;
  };
  CudaBackendOptions options_;
  CudaAllocator* cuda_allocator_;  // the base's allocator, typed
  int device_;
  std::unique_ptr<CUstream_st, StreamDeleter> stream_;
  std::unique_ptr<cublasContext, CublasDeleter> cublas_;
};

std::unique_ptr<CudaBackend> make_cuda_backend(CudaBackendOptions options = {});

// Throws an mdtp::Error unless `t` is defined and lives on a CUDA device ("<what> lives on host;
// the CUDA backend needs device tensors").
void require_device_tensor(const Tensor& t, const char* what);

}  // namespace mdtp
