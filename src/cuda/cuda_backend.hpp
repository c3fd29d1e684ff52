#pragma once
// The CUDA backend: cuBLAS GEMM and the kernels of backend_kernels.cu, for device tensors of
// f32, f64, bf16 and f16 (16-bit types are storage only: fp32 arithmetic, fp32 GEMM accumulation).
// It mirrors the host backend's semantics and numerics op by op (tests/gpu compare them).
//
// Files: cuda_backend.cpp (elementwise, reductions, LayerNorm), cuda_gemm.cpp, cuda_attention.cpp,
// cuda_train_backend.cpp (embedding, cross-entropy, AdamW); kernels in *.cu.
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
  int device_index() const { return device_; }
  cudaStream_t stream() const { return stream_.get(); }
  cublasHandle_t cublas() const { return cublas_.get(); }
  CudaAllocator& cuda_allocator() const { return *cuda_allocator_; }
  bool allow_tf32() const { return options_.allow_tf32; }
  void synchronize() const;  // waits for everything enqueued on stream()

  std::vector<double> to_f64(const Tensor& t) const override;
  void assign_f64(Tensor& t, const std::vector<double>& values) const override;
  void fill(Tensor& t, double value) const override;
  void copy(const Tensor& src, Tensor& dst) const override;
  void copy_block(const Tensor& src, std::int64_t sr0, std::int64_t sc0, Tensor& dst,
                  std::int64_t dr0, std::int64_t dc0, std::int64_t rows,
                  std::int64_t cols) const override;
  void gemm(bool transpose_a, bool transpose_b, double alpha, const Tensor& a, const Tensor& b,
            double beta, Tensor& c) const override;
  void axpy(double alpha, const Tensor& x, Tensor& y) const override;
  void scale(Tensor& x, double alpha) const override;
  void add_row_vector(Tensor& y, const Tensor& row) const override;
  void column_sums(const Tensor& x, Tensor& out, double beta) const override;
  double sum_squares(const Tensor& x) const override;
  void gelu_forward(const Tensor& x, Tensor& y) const override;
  void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) const override;
  void row_mean_m2(const Tensor& x, Tensor& stats) const override;
  void merge_row_stats(const Tensor& stacked, int parts, std::int64_t count_per_part, double eps,
                       Tensor& mean_rstd) const override;
  void layernorm_apply(const Tensor& x, const Tensor& mean_rstd, const Tensor& gamma,
                       const Tensor& beta, Tensor& xhat, Tensor& y) const override;
  void layernorm_backward_sums(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
                               Tensor& sums) const override;
  // dx must not alias dy (dgamma/dbeta are summed from dy after dx is written).
  void layernorm_backward(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
                          const Tensor& mean_rstd, const Tensor& sums, std::int64_t n, Tensor& dx,
                          Tensor& dgamma, Tensor& dbeta) const override;

  // Training ops (semantics in core/backend.hpp).  Token ids/targets are uploaded per call.
  void embedding_forward(const Tensor& table, std::span<const std::int32_t> ids, std::int64_t first_row,
                         Tensor& out) const override;
  void embedding_backward(const Tensor& dy, std::span<const std::int32_t> ids, std::int64_t first_row,
                          Tensor& table_grad) const override;
  void attention_forward(const Tensor& qkv, std::int64_t seq_len, std::int64_t n_head, Tensor& y,
                         Tensor& probs) const override;
  void attention_backward(const Tensor& dy, const Tensor& qkv, const Tensor& probs, std::int64_t seq_len,
                          std::int64_t n_head, Tensor& dqkv) const override;
  void xent_row_max(const Tensor& logits, std::int64_t valid_cols, Tensor& row_max) const override;
  void xent_partial_sums(const Tensor& logits, std::int64_t valid_cols, const Tensor& row_max,
                         std::span<const std::int32_t> targets, std::int64_t col0, Tensor& sums) const override;
  void xent_backward(const Tensor& logits, std::int64_t valid_cols, const Tensor& lse,
                     std::span<const std::int32_t> targets, std::int64_t col0, double scale,
                     Tensor& dlogits) const override;
  // All four of param's dtype (bf16/f16 included: then m, v are 16-bit too; for fp32 master
  // weights use the free adamw_update of train_ops.hpp).
  void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& step) const override;

  // dst = src converted to dst's dtype (same element count): mixed precision casts.
  void convert(const Tensor& src, Tensor& dst) const;

 private:
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
