#pragma once
// TimedBackend: a Backend that forwards every call to another one and adds the wall time of each
// kernel to a running total — GEMMs apart from everything else (elementwise, reductions, block
// copies).  The layer runner builds the layers on it, so compute time is measured where it is
// spent instead of being inferred as "step time minus communication", which would also count
// allocation, bookkeeping and, on an oversubscribed node, time spent descheduled between calls.
// It shares the inner backend's allocator, so memory accounting is unchanged.
//
// Every virtual of Backend is forwarded here (a new one in core/backend.hpp needs one line in
// each of the two files).  Valid for synchronous backends (the host): a CUDA kernel returns at launch, so its time would
// need device events instead.
#include <chrono>

#include "core/backend.hpp"

namespace mdtp::bench {

struct KernelSeconds {
  double gemm = 0.0;
  double other = 0.0;  // elementwise, reductions, copies, LayerNorm pieces
  double total() const { return gemm + other; }
};

class TimedBackend final : public Backend {
 public:
  explicit TimedBackend(const Backend& inner) : Backend(inner.allocator_ptr()), inner_(inner) {}

  const KernelSeconds& seconds() const { return seconds_; }
  void reset() { seconds_ = {}; }

  DeviceKind device() const override { return inner_.device(); }
  const char* name() const override { return inner_.name(); }
  std::vector<double> to_f64(const Tensor& t) const override { return inner_.to_f64(t); }
  void assign_f64(Tensor& t, const std::vector<double>& values) const override { inner_.assign_f64(t, values); }

  void fill(Tensor& t, double value) const override;
  void copy(const Tensor& src, Tensor& dst) const override;
  void copy_block(const Tensor& src, std::int64_t sr0, std::int64_t sc0, Tensor& dst, std::int64_t dr0,
                  std::int64_t dc0, std::int64_t rows, std::int64_t cols) const override;
  void gemm(bool transpose_a, bool transpose_b, double alpha, const Tensor& a, const Tensor& b, double beta,
            Tensor& c) const override;
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
  void layernorm_apply(const Tensor& x, const Tensor& mean_rstd, const Tensor& gamma, const Tensor& beta,
                       Tensor& xhat, Tensor& y) const override;
  void layernorm_backward_sums(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
                               Tensor& sums) const override;
  void layernorm_backward(const Tensor& dy, const Tensor& xhat, const Tensor& gamma, const Tensor& mean_rstd,
                          const Tensor& sums, std::int64_t n, Tensor& dx, Tensor& dgamma,
                          Tensor& dbeta) const override;
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
  void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& step) const override;

 private:
  // Runs `call` and adds its wall time to `bucket`.
  template <class Call>
  decltype(auto) timed(double KernelSeconds::*bucket, Call&& call) const {
    const auto start = std::chrono::steady_clock::now();
    struct Add {  // also on an exception, so a failed call is not silently lost from the totals
      KernelSeconds& s;
      double KernelSeconds::*b;
      std::chrono::steady_clock::time_point t0;
      ~Add() { s.*b += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
    } add{seconds_, bucket, start};
    return call();
  }

  const Backend& inner_;
  // Mutable: the Backend interface is const (layers hold `const Backend&`); the totals are
  // instrumentation, not state of the computation.
  mutable KernelSeconds seconds_;
};

}  // namespace mdtp::bench
