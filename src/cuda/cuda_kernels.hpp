#pragma once
// Launchers of the kernels behind CudaBackend (backend_kernels.cu) and the training ops
// (train_kernels.cu).  Internal to src/cuda: callers validate shapes, dtypes and devices first;
// these take raw device pointers, enqueue on `stream` and check the launch.  Pointers to 16-bit
// dtypes hold __nv_bfloat16 / __half; all arithmetic on them is fp32.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.hpp"

namespace mdtp::kernels {

void fill(DType type, void* x, std::int64_t n, double value, cudaStream_t stream);
void convert(DType src_type, const void* src, DType dst_type, void* dst, std::int64_t n,
             cudaStream_t stream);
// y (of y_type: type, or f32 for 16-bit x) += alpha x.
void axpy(DType type, double alpha, const void* x, DType y_type, void* y, std::int64_t n, cudaStream_t stream);
void scale(DType type, void* x, std::int64_t n, double alpha, cudaStream_t stream);
void add_row_vector(DType type, void* y, const void* row, std::int64_t rows, std::int64_t cols,
                    cudaStream_t stream);
// Column reductions run in two passes (a block per 32 columns and chunk of rows, then the chunks
// summed in order): `workspace` holds column_partials(rows, cols, sums) values of the accumulation
// type (f64 for f64 data, else f32).  The chunks depend on the shape alone, so results are the same
// on every GPU and every run.
std::int64_t column_partials(std::int64_t rows, std::int64_t cols, int sums);
// out (of out_type: type, or f32 for 16-bit x) = beta out + column sums of x.
void column_sums(DType type, const void* x, DType out_type, void* out, std::int64_t rows, std::int64_t cols,
                 double beta, void* workspace, cudaStream_t stream);

// Sum of squares accumulated in float64: per-block partials in workspace[0, kReduceParts), their
// total (summed in a fixed order, so the result is deterministic) in workspace[kReduceParts].
inline constexpr int kReduceParts = 256;
void sum_squares(DType type, const void* x, std::int64_t n, double* workspace, cudaStream_t stream);

void gelu_forward(DType type, const void* x, void* y, std::int64_t n, cudaStream_t stream);
void gelu_backward(DType type, const void* x, const void* dy, void* dx, std::int64_t n,
                   cudaStream_t stream);

void row_mean_m2(DType type, const void* x, double* stats, std::int64_t rows, std::int64_t cols,
                 cudaStream_t stream);
void merge_row_stats(const double* stacked, int parts, std::int64_t count_per_part, double eps,
                     double* mean_rstd, std::int64_t rows, bool centred, cudaStream_t stream);
void layernorm_apply(DType type, const void* x, const double* mean_rstd, const void* gamma,
                     const void* beta, void* xhat, void* y, std::int64_t rows, std::int64_t cols,
                     cudaStream_t stream);
void layernorm_backward_sums(DType type, const void* dy, const void* xhat, const void* gamma,
                             double* sums, std::int64_t rows, std::int64_t cols, bool centred,
                             cudaStream_t stream);
void layernorm_backward(DType type, const void* dy, const void* xhat, const void* gamma,
                        const double* mean_rstd, const double* sums, std::int64_t n_total, void* dx,
                        DType grad_type, void* dgamma, void* dbeta, std::int64_t rows, std::int64_t cols,
                        void* workspace, cudaStream_t stream);  // workspace: column_partials(rows, cols, 2)

// ---- training kernels (train_kernels.cu) ----
// causal_queries > 0: rows are (…, query) rows of a [.., causal_queries, cols] score tensor and
// column j of query q is masked when j > q + cols - causal_queries (the queries are the last ones).
void softmax_rows(DType type, const void* x, void* y, std::int64_t rows, std::int64_t cols,
                  std::int64_t causal_queries, cudaStream_t stream);
// dx = scale * y * (dy - rowsum(dy * y)); dx may alias dy.
void softmax_rows_backward(DType type, const void* y, const void* dy, void* dx, std::int64_t rows,
                           std::int64_t cols, double scale, cudaStream_t stream);
void cross_entropy_forward(DType type, const void* logits, const std::int32_t* targets,
                           double* losses, double* lse, std::int64_t rows, std::int64_t cols,
                           cudaStream_t stream);
void cross_entropy_backward(DType type, const void* logits, const std::int32_t* targets,
                            const double* lse, double scale, void* dlogits, std::int64_t rows,
                            std::int64_t cols, cudaStream_t stream);

// The host backend's AdamW arithmetic (core/host_backend.cpp), constants precomputed in double:
// m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g²;  w = w·decay - step_size·m / (sqrt(v)·inv_sqrt_c2 + eps)
// with g = grad·grad_scale, decay = 1 - lr·wd, step_size = lr / (1 - b1^t), inv_sqrt_c2 = 1/sqrt(1 - b2^t).
struct AdamWScalars {
  double beta1, beta2, decay, step_size, inv_sqrt_c2, eps, grad_scale;
};
// From AdamWStep's fields; throws unless step >= 1.
AdamWScalars adamw_scalars(double lr, double beta1, double beta2, double eps, double weight_decay,
                           std::int64_t step, double grad_scale);
// Throws unless `state` may hold AdamW moments: f16 may not, because its range loses the second
// moment (v = (1-beta2)·g² flushes to zero below |g| of about 1e-3, and the step then divides m by
// eps).  `what` names the tensor ("adamw m").
void require_adamw_state(DType state, const char* what);
// m and v are of state_type and so is master (null: param is the weight).  Combinations: all four
// f32, f64 or bf16 (no master), or bf16/f16 params with f32 state and an f32 master; grad has the
// param's dtype or state_type.  f16 state is refused (require_adamw_state).
void adamw(DType param_type, void* param, DType grad_type, const void* grad, DType state_type,
           void* master, void* m, void* v, std::int64_t n, const AdamWScalars& s,
           cudaStream_t stream);

// ---- model kernels (model_kernels.cu): the Backend's training ops ----
void embedding_forward(DType type, const void* table, std::int64_t table_rows, std::int64_t cols,
                       const std::int32_t* ids, std::int64_t n, std::int64_t first_row, void* out,
                       cudaStream_t stream);
// For each u < unique_rows: table_grad (of grad_type: type, or f32 for 16-bit dy)[rows[u], :] += dy[tokens[k], :] for k in
// [offsets[u], offsets[u+1]), in that order (deterministic: the host's order).
void embedding_backward(DType type, const void* dy, std::int64_t cols, const std::int32_t* rows,
                        const std::int32_t* offsets, const std::int32_t* tokens, std::int64_t unique_rows,
                        DType grad_type, void* table_grad, cudaStream_t stream);
void xent_row_max(DType type, const void* logits, std::int64_t rows, std::int64_t cols,
                  std::int64_t valid_cols, double* row_max, cudaStream_t stream);
// targets may be null (no row has its target in this slice).
void xent_partial_sums(DType type, const void* logits, std::int64_t rows, std::int64_t cols,
                       std::int64_t valid_cols, const double* row_max, const std::int32_t* targets,
                       std::int64_t col0, double* sums, cudaStream_t stream);
void xent_backward(DType type, const void* logits, std::int64_t rows, std::int64_t cols,
                   std::int64_t valid_cols, const double* lse, const std::int32_t* targets,
                   std::int64_t col0, double scale, void* dlogits, cudaStream_t stream);

}  // namespace mdtp::kernels
