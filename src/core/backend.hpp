#pragma once
// Backend: the compute a layer may ask for, on the device its tensors live on.  Layers are
// written against this interface only, so the same layer runs on the host (Eigen) and on CUDA
// (cuBLAS + kernels).  All matrices are 2-D row-major views (Tensor::rows() x Tensor::cols()).
// A backend owns the allocator (and so the memory accounting) of one rank.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/tensor.hpp"

namespace mdtp {

// One AdamW step's hyper-parameters (PyTorch AdamW semantics: decoupled weight decay,
// bias-corrected moments; `step` counts from 1).  The gradient is multiplied by grad_scale
// first (gradient clipping).
struct AdamWStep {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.0;
  std::int64_t step = 1;
  double grad_scale = 1.0;
};

class Backend {
 public:
  explicit Backend(std::shared_ptr<Allocator> allocator) : allocator_(std::move(allocator)) {}
  virtual ~Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  virtual DeviceKind device() const = 0;
  virtual const char* name() const = 0;
  Allocator& allocator() const { return *allocator_; }
  const std::shared_ptr<Allocator>& allocator_ptr() const { return allocator_; }

  Tensor empty(const Shape& shape, DType dtype, MemCategory category) const;
  Tensor zeros(const Shape& shape, DType dtype, MemCategory category) const;
  // Host <-> tensor transfers in float64 (tests, initialisation, checkpoints).
  Tensor from_f64(const std::vector<double>& values, const Shape& shape, DType dtype,
                  MemCategory category) const;
  virtual std::vector<double> to_f64(const Tensor& t) const = 0;
  virtual void assign_f64(Tensor& t, const std::vector<double>& values) const = 0;

  virtual void fill(Tensor& t, double value) const = 0;
  virtual void copy(const Tensor& src, Tensor& dst) const = 0;  // same element count
  Tensor clone(const Tensor& src, MemCategory category) const;
  // dst[dr0 + i, dc0 + j] = src[sr0 + i, sc0 + j] for a rows x cols block (2-D views).
  virtual void copy_block(const Tensor& src, std::int64_t sr0, std::int64_t sc0, Tensor& dst,
                          std::int64_t dr0, std::int64_t dc0, std::int64_t rows,
                          std::int64_t cols) const = 0;

  // C = alpha * op(A) * op(B) + beta * C, op = transpose when the flag is set.
  virtual void gemm(bool transpose_a, bool transpose_b, double alpha, const Tensor& a,
                    const Tensor& b, double beta, Tensor& c) const = 0;
  virtual void axpy(double alpha, const Tensor& x, Tensor& y) const = 0;  // y += alpha x
  virtual void scale(Tensor& x, double alpha) const = 0;
  virtual void add_row_vector(Tensor& y, const Tensor& row) const = 0;   // y[i,:] += row
  // out = beta * out + sum over rows of x  (out has x.cols() elements): bias gradients.
  virtual void column_sums(const Tensor& x, Tensor& out, double beta) const = 0;
  virtual double sum_squares(const Tensor& x) const = 0;  // accumulated in float64

  // GeLU, tanh approximation (GPT-2).
  virtual void gelu_forward(const Tensor& x, Tensor& y) const = 0;
  virtual void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) const = 0;

  // LayerNorm pieces; statistics tensors are float64 [rows, 2] whatever the data type.
  // Local per-row (mean, M2 = sum of squared deviations) over this rank's columns.
  virtual void row_mean_m2(const Tensor& x, Tensor& stats) const = 0;
  // Chan's parallel merge of `parts` equal-count partial stats stacked as [parts*rows, 2]
  // (part-major), each over `count_per_part` columns; writes [rows, 2] = (mean, 1/sqrt(var+eps)).
  virtual void merge_row_stats(const Tensor& stacked, int parts, std::int64_t count_per_part,
                               double eps, Tensor& mean_rstd) const = 0;
  // xhat = (x - mean) * rstd; y = xhat * gamma + beta.
  virtual void layernorm_apply(const Tensor& x, const Tensor& mean_rstd, const Tensor& gamma,
                               const Tensor& beta, Tensor& xhat, Tensor& y) const = 0;
  // sums[i] = (sum_j dy*gamma, sum_j dy*gamma*xhat) over this rank's columns.
  virtual void layernorm_backward_sums(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
                                       Tensor& sums) const = 0;
  // dx = rstd * (dy*gamma - (s1 + xhat*s2)/n); dgamma += colsum(dy*xhat); dbeta += colsum(dy).
  virtual void layernorm_backward(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
                                  const Tensor& mean_rstd, const Tensor& sums, std::int64_t n,
                                  Tensor& dx, Tensor& dgamma, Tensor& dbeta) const = 0;

  // ---- Training ops (GPT model).  Token ids are int32 on the host (the data is read there); a
  // device backend copies them over.
  // Embedding rows held by this rank are table rows [first_row, first_row + table.rows()) of the
  // full table.  out[i, :] = table[ids[i] - first_row, :] when the id falls in that range, else 0
  // (the vocabulary-parallel lookup: exactly one rank of the vocabulary split contributes).
  virtual void embedding_forward(const Tensor& table, std::span<const std::int32_t> ids,
                                 std::int64_t first_row, Tensor& out) const = 0;
  // table_grad[ids[i] - first_row, :] += dy[i, :] for the ids in range (repeated ids accumulate).
  virtual void embedding_backward(const Tensor& dy, std::span<const std::int32_t> ids,
                                  std::int64_t first_row, Tensor& table_grad) const = 0;

  // Causal multi-head self-attention over whole sequences.  qkv [N, 3·n_head·d]: rows are the
  // tokens of N / seq_len sequences of seq_len tokens; columns [Q heads | K heads | V heads], each
  // head d wide.  y [N, n_head·d]; probs [N / seq_len, n_head, seq_len, seq_len] receives the
  // softmax of the scaled (1/sqrt(d)) scores, 0 above the diagonal, kept for backward.
  virtual void attention_forward(const Tensor& qkv, std::int64_t seq_len, std::int64_t n_head,
                                 Tensor& y, Tensor& probs) const = 0;
  // dqkv [N, 3·n_head·d] from dy [N, n_head·d] (overwritten, not accumulated).
  virtual void attention_backward(const Tensor& dy, const Tensor& qkv, const Tensor& probs,
                                  std::int64_t seq_len, std::int64_t n_head, Tensor& dqkv) const = 0;

  // Softmax cross-entropy over a vocabulary split by columns.  logits [rows, cols] hold vocabulary
  // entries [col0, col0 + cols) of which only the first `valid_cols` are real (the rest is padding
  // to a multiple of the split and is treated as -inf).  Statistics are f64 whatever the dtype.
  // row_max [rows]: maximum over the valid columns (-inf when there are none).
  virtual void xent_row_max(const Tensor& logits, std::int64_t valid_cols, Tensor& row_max) const = 0;
  // sums [rows, 2]: (Σ_valid exp(logit - max[i]), the logit of targets[i] when it lies in this
  // slice, else 0), so that both are completed by one all-reduce SUM over the split.
  virtual void xent_partial_sums(const Tensor& logits, std::int64_t valid_cols, const Tensor& row_max,
                                 std::span<const std::int32_t> targets, std::int64_t col0,
                                 Tensor& sums) const = 0;
  // dlogits = scale · (exp(logit - lse[i]) - [col0 + j == targets[i]]) on valid columns, 0 on
  // padding; lse f64 [rows] is the complete log-sum-exp of each row.
  virtual void xent_backward(const Tensor& logits, std::int64_t valid_cols, const Tensor& lse,
                             std::span<const std::int32_t> targets, std::int64_t col0, double scale,
                             Tensor& dlogits) const = 0;

  // One AdamW step in place on param and its moments m, v (all of param's dtype).
  virtual void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                            const AdamWStep& step) const = 0;

 private:
  std::shared_ptr<Allocator> allocator_;
};

// The host backend (Eigen); f32 and f64.
std::unique_ptr<Backend> make_host_backend();

}  // namespace mdtp
