#pragma once
// TimedBackend: a Backend that forwards every call to another one and adds the wall time of each
// kernel to a running total — GEMMs apart from everything else (elementwise, reductions, block
// copies).  The layer runner builds the layers on it, so compute time is measured where it is
// spent instead of being inferred as "step time minus communication", which would also count
// allocation, bookkeeping and, on an oversubscribed node, time spent descheduled between calls.
// It shares the inner backend's allocator, so memory accounting is unchanged.
//
// Every do_* of Backend is forwarded to the inner backend's public (validating) method (a new op
// in core/backend.hpp needs one line in each of the two files).  Valid for synchronous backends (the host): a CUDA kernel returns at launch, so its time would
// need device events instead.
#include <chrono>

#include "comm/run_clock.hpp"
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
  bool computes_in(DType dtype) const override { return inner_.computes_in(dtype); }

 protected:
  std::vector<double> do_to_f64(const Tensor& t) const override { return inner_.to_f64(t); }
  void do_assign_f64(Tensor& t, const std::vector<double>& values) const override { inner_.assign_f64(t, values); }

  void do_fill(Tensor& t, double value) const override;
  void do_copy(const Tensor& src, Tensor& dst) const override;
  void do_convert(const Tensor& src, Tensor& dst) const override;
  void do_copy_block(const Tensor& src, std::int64_t sr0, std::int64_t sc0, Tensor& dst, std::int64_t dr0,
                  std::int64_t dc0, std::int64_t rows, std::int64_t cols) const override;
  void do_gemm(bool transpose_a, bool transpose_b, double alpha, const Tensor& a, const Tensor& b, double beta,
            Tensor& c) const override;
  void do_axpy(double alpha, const Tensor& x, Tensor& y) const override;
  void do_scale(Tensor& x, double alpha) const override;
  void do_add_row_vector(Tensor& y, const Tensor& row) const override;
  void do_column_sums(const Tensor& x, Tensor& out, double beta) const override;
  double do_sum_squares(const Tensor& x) const override;
  void do_gelu_forward(const Tensor& x, Tensor& y) const override;
  void do_gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) const override;
  void do_row_mean_m2(const Tensor& x, Tensor& stats) const override;
  void do_merge_row_stats(const Tensor& stacked, int parts, std::int64_t count_per_part, double eps,
                       Tensor& mean_rstd, bool centred) const override;
  void do_layernorm_apply(const Tensor& x, const Tensor& mean_rstd, const Tensor& gamma, const Tensor& beta,
                       Tensor& xhat, Tensor& y) const override;
  void do_layernorm_backward_sums(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
                               Tensor& sums, bool centred) const override;
  void do_layernorm_backward(const Tensor& dy, const Tensor& xhat, const Tensor& gamma, const Tensor& mean_rstd,
                          const Tensor& sums, std::int64_t n, Tensor& dx, Tensor& dgamma,
                          Tensor& dbeta) const override;
  void do_adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& step) const override;

 private:
  // Runs `call` and adds its wall time to `bucket`.
  template <class Call>
  decltype(auto) timed(double KernelSeconds::*bucket, Call&& call) const {
    const auto start = RunClock::now();
    struct Add {  // also on an exception, so a failed call is not silently lost from the totals
      KernelSeconds& s;
      double KernelSeconds::*b;
      RunClock::time_point t0;
      ~Add() { s.*b += std::chrono::duration<double>(RunClock::now() - t0).count(); }
    } add{seconds_, bucket, start};
    return call();
  }

  const Backend& inner_;
  // Mutable: the Backend interface is const (layers hold `const Backend&`); the totals are
  // instrumentation, not state of the computation.
  mutable KernelSeconds seconds_;
};

}  // namespace mdtp::bench
