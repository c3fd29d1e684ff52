#pragma once
// Backend: the compute a layer may ask for, on the device its tensors live on.  Layers are
// written against this interface only, so the same layer runs on the host (a CBLAS GEMM and
// vectorised loops) and on CUDA (cuBLAS + kernels).  All matrices are 2-D row-major views
// (Tensor::rows() x Tensor::cols()).  A backend owns the allocator (and so the memory accounting)
// of one rank.
//
// The structure is the one Communicator has: every public method is non-virtual and validates
// its arguments once, here (defined tensors, on this backend's device, of a dtype it computes in,
// shapes that chain), with an mdtp::Error naming the tensor and what was expected; only then does
// it call the implementation's protected do_* method, which may assume valid arguments.  So the
// host and the CUDA backend cannot drift apart in what they accept.
//
// The GPT-specific kernels (embedding, attention, cross-entropy) are not here: they are the
// model's, in model/gpt_kernels.hpp.
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
  // Element types this backend computes in (the host and CUDA: f32, f64, and bf16/f16 in f32).
  virtual bool computes_in(DType dtype) const = 0;
  Allocator& allocator() const { return *allocator_; }
  const std::shared_ptr<Allocator>& allocator_ptr() const { return allocator_; }
  // True when the model's tensors hold no values (a synthetic allocator: a simulated cluster at
  // realistic sizes, kernels charged but not run); checks that read values are off then.
  bool synthetic_values() const { return !allocator_->holds_values(MemCategory::parameters); }

  Tensor empty(const Shape& shape, DType dtype, MemCategory category) const;
  Tensor zeros(const Shape& shape, DType dtype, MemCategory category) const;
  // Host <-> tensor transfers in float64 (tests, initialisation, checkpoints).
  Tensor from_f64(const std::vector<double>& values, const Shape& shape, DType dtype, MemCategory category) const;
  std::vector<double> to_f64(const Tensor& t) const;
  void assign_f64(Tensor& t, const std::vector<double>& values) const;

  void fill(Tensor& t, double value) const;
  // Same element count and dtype; src and dst are either the same range or disjoint (a partial
  // overlap is refused: no backend can copy it in parallel safely).
  void copy(const Tensor& src, Tensor& dst) const;
  Tensor clone(const Tensor& src, MemCategory category) const;
  // dst = src converted to dst's dtype (same element count, any two dtypes): narrowing rounds once,
  // to nearest even (a master weight into its bf16 parameter); widening is exact.
  void convert(const Tensor& src, Tensor& dst) const;
  // dst[dr0 + i, dc0 + j] = src[sr0 + i, sc0 + j] for a rows x cols block (2-D views).
  void copy_block(const Tensor& src, std::int64_t sr0, std::int64_t sc0, Tensor& dst, std::int64_t dr0,
                  std::int64_t dc0, std::int64_t rows, std::int64_t cols) const;

  // C = alpha * op(A) * op(B) + beta * C, op = transpose when the flag is set.  A and B share a
  // dtype; C has it too, or is f32 when A and B are bf16/f16 (a weight gradient kept in f32; the
  // sum is f32 either way).  The same holds for axpy's y, column_sums' out and LayerNorm's dγ, dβ:
  // an accumulator of 16-bit data may be f32.
  void gemm(bool transpose_a, bool transpose_b, double alpha, const Tensor& a, const Tensor& b, double beta,
            Tensor& c) const;
  void axpy(double alpha, const Tensor& x, Tensor& y) const;  // y += alpha x
  void scale(Tensor& x, double alpha) const;
  void add_row_vector(Tensor& y, const Tensor& row) const;  // y[i,:] += row
  // out = beta * out + sum over rows of x  (out has x.cols() elements): bias gradients.
  void column_sums(const Tensor& x, Tensor& out, double beta) const;
  double sum_squares(const Tensor& x) const;  // accumulated in float64

  // GeLU, tanh approximation (GPT-2).
  void gelu_forward(const Tensor& x, Tensor& y) const;
  void gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) const;

  // LayerNorm pieces; statistics tensors are float64 [rows, 2] whatever the data type.
  // Local per-row (mean, M2 = sum of squared deviations) over this rank's columns.
  void row_mean_m2(const Tensor& x, Tensor& stats) const;
  // Chan's parallel merge of `parts` equal-count partial stats stacked as [parts*rows, 2]
  // (part-major), each over `count_per_part` columns; writes [rows, 2] = (mean, 1/sqrt(var+eps)).
  // centred false (RMSNorm, which divides by the root mean square and keeps the mean): writes
  // (0, 1/sqrt(mean² + var + eps)), so that layernorm_apply with β = 0 gives x·rstd·γ.
  void merge_row_stats(const Tensor& stacked, int parts, std::int64_t count_per_part, double eps,
                       Tensor& mean_rstd, bool centred = true) const;
  // xhat = (x - mean) * rstd; y = xhat * gamma + beta.
  void layernorm_apply(const Tensor& x, const Tensor& mean_rstd, const Tensor& gamma, const Tensor& beta,
                       Tensor& xhat, Tensor& y) const;
  // sums[i] = (sum_j dy*gamma, sum_j dy*gamma*xhat) over this rank's columns; centred false
  // (RMSNorm, whose output does not depend on the mean) writes (0, sum_j dy*gamma*xhat), so that
  // layernorm_backward gives RMSNorm's dx = rstd * (dy*gamma - xhat*s2/n).
  void layernorm_backward_sums(const Tensor& dy, const Tensor& xhat, const Tensor& gamma, Tensor& sums,
                               bool centred = true) const;
  // dx = rstd * (dy*gamma - (s1 + xhat*s2)/n); dgamma += colsum(dy*xhat); dbeta += colsum(dy).
  // dx must not alias dy (dgamma and dbeta are summed from dy).
  void layernorm_backward(const Tensor& dy, const Tensor& xhat, const Tensor& gamma, const Tensor& mean_rstd,
                          const Tensor& sums, std::int64_t n, Tensor& dx, Tensor& dgamma, Tensor& dbeta) const;

  // One AdamW step in place on param and its moments m, v (all four of param's dtype).
  void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& step) const;

  // Throws unless `t` is defined, lives on this backend's device and holds a dtype it computes in
  // (`what` names the tensor in the message).  For the fronts of other interfaces built on a
  // backend (model/gpt_kernels.hpp).
  void require_operand(const Tensor& t, const char* what) const;

 protected:
  virtual std::vector<double> do_to_f64(const Tensor& t) const = 0;
  virtual void do_assign_f64(Tensor& t, const std::vector<double>& values) const = 0;
  virtual void do_fill(Tensor& t, double value) const = 0;
  virtual void do_copy(const Tensor& src, Tensor& dst) const = 0;
  virtual void do_convert(const Tensor& src, Tensor& dst) const = 0;
  virtual void do_copy_block(const Tensor& src, std::int64_t sr0, std::int64_t sc0, Tensor& dst, std::int64_t dr0,
                             std::int64_t dc0, std::int64_t rows, std::int64_t cols) const = 0;
  virtual void do_gemm(bool transpose_a, bool transpose_b, double alpha, const Tensor& a, const Tensor& b,
                       double beta, Tensor& c) const = 0;
  virtual void do_axpy(double alpha, const Tensor& x, Tensor& y) const = 0;
  virtual void do_scale(Tensor& x, double alpha) const = 0;
  virtual void do_add_row_vector(Tensor& y, const Tensor& row) const = 0;
  virtual void do_column_sums(const Tensor& x, Tensor& out, double beta) const = 0;
  virtual double do_sum_squares(const Tensor& x) const = 0;
  virtual void do_gelu_forward(const Tensor& x, Tensor& y) const = 0;
  virtual void do_gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) const = 0;
  virtual void do_row_mean_m2(const Tensor& x, Tensor& stats) const = 0;
  virtual void do_merge_row_stats(const Tensor& stacked, int parts, std::int64_t count_per_part, double eps,
                                  Tensor& mean_rstd, bool centred) const = 0;
  virtual void do_layernorm_apply(const Tensor& x, const Tensor& mean_rstd, const Tensor& gamma,
                                  const Tensor& beta, Tensor& xhat, Tensor& y) const = 0;
  virtual void do_layernorm_backward_sums(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
                                          Tensor& sums, bool centred) const = 0;
  virtual void do_layernorm_backward(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
                                     const Tensor& mean_rstd, const Tensor& sums, std::int64_t n, Tensor& dx,
                                     Tensor& dgamma, Tensor& dbeta) const = 0;
  virtual void do_adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                               const AdamWStep& step) const = 0;

 private:
  std::shared_ptr<Allocator> allocator_;
};

// The host backend (a CBLAS GEMM where one was found at configure time, else Eigen's): f32 and f64,
// and bf16/f16 storage computed in f32 (core/host_low_precision.hpp).
std::unique_ptr<Backend> make_host_backend();
// The same kernels over another allocator (a simulated cluster's synthetic one).
std::unique_ptr<Backend> make_host_backend(std::shared_ptr<Allocator> allocator);

}  // namespace mdtp
