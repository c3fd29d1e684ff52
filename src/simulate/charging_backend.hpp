#pragma once
// A Backend that charges each kernel's modelled time on a named GPU to the clock a KernelCharge
// keeps, then runs the kernel on the backend it wraps (the values stay real and checkable).
//
// Why: under SimGrid's SMPI (docs/simulate.md) the simulated clock advances only by what the
// program declares; the host's own compute time, measured, would make simulated times depend on
// this machine and on its load (not reproducible).  Charging the cost layer's per-kernel model
// (cost/kernel_time.hpp: a roofline for GEMMs, HBM streaming for the rest) gives the same
// simulated compute time for the same command, on the GPU of the cluster preset.
//
// Synthetic values (`mdtp simulate --values synthetic`, synthetic_allocator.hpp): a kernel whose
// output holds no values is charged but not run; a synthetic tensor reads as zeros.
//
// What is charged: every Backend kernel (GEMMs and streaming kernels); host transfers
// (from_f64/to_f64/assign_f64: initialisation, checkpoints, tests) are free.  Kernels outside the
// Backend interface (the model's fused attention and activation kernels) are not charged here.
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "core/backend.hpp"
#include "cost/cluster.hpp"
#include "simulate/kernel_tally.hpp"

namespace mdtp::simulate {

// Receives the modelled seconds of one kernel.
using KernelCharge = std::function<void(double seconds)>;

// Where a charging wrapper's kernels go: each kernel's seconds to the KernelCharge (if any), their
// running sum, and the kernel's kind, bytes and seconds to a KernelTally (if any, kernel_tally.hpp).
// The backend and the model's kernels (charging_gpt_kernels.hpp) each hold one.
class ChargeMeter {
 public:
  ChargeMeter(KernelCharge charge, std::shared_ptr<KernelTally> tally)
      : charge_(std::move(charge)), tally_(std::move(tally)) {}
  void operator()(const char* kind, double bytes, double seconds) {
    total_ += seconds;
    if (tally_) tally_->add(kind, bytes, seconds);
    if (charge_) charge_(seconds);
  }
  double total() const { return total_; }

 private:
  KernelCharge charge_;
  std::shared_ptr<KernelTally> tally_;
  double total_ = 0.0;
};

class ChargingBackend final : public Backend {
 public:
  ChargingBackend(std::unique_ptr<Backend> inner, cost::Cluster cluster, KernelCharge charge,
                  std::shared_ptr<KernelTally> tally = nullptr);

  DeviceKind device() const override { return inner_->device(); }
  const char* name() const override { return name_.c_str(); }
  bool computes_in(DType dtype) const override { return inner_->computes_in(dtype); }
  // Seconds charged so far.
  double charged_seconds() const { return charge_.total(); }

 protected:
  std::vector<double> do_to_f64(const Tensor& t) const override;
  void do_assign_f64(Tensor& t, const std::vector<double>& values) const override;
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
  void do_layernorm_backward_sums(const Tensor& dy, const Tensor& xhat, const Tensor& gamma, Tensor& sums,
                                  bool centred) const override;
  void do_layernorm_backward(const Tensor& dy, const Tensor& xhat, const Tensor& gamma, const Tensor& mean_rstd,
                             const Tensor& sums, std::int64_t n, Tensor& dx, Tensor& dgamma,
                             Tensor& dbeta) const override;
  void do_adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& step) const override;

 private:
  // Charges a streaming kernel of this kind that reads and writes these tensors once each.
  void charge_stream(const char* kind, std::initializer_list<const Tensor*> touched) const;

  std::unique_ptr<Backend> inner_;
  cost::Cluster cluster_;
  mutable ChargeMeter charge_;
  std::string name_;
};

// The cluster named in MDTP_SIMULATION (run/simulation_context.hpp), its file read here.
// mdtp::Error naming the variable when it is unset (the SMPI build run without `mdtp simulate`), so
// every rank refuses before anything starts.
cost::Cluster simulated_cluster();

// What makes the SMPI build's backend under `mdtp simulate`: the host backend, its kernels charged
// as the GPU of the cluster named in MDTP_SIMULATION (run/simulation_context.hpp), whose file is
// read once, here.  mdtp::Error naming the variable when it is unset (the SMPI build run without
// `mdtp simulate`), so every rank refuses before anything starts.  `tally`: where the backend's
// kernels are also counted by kind (the rank that writes the kernels table), or none.
std::function<std::unique_ptr<Backend>()> simulated_backend_factory(std::shared_ptr<KernelTally> tally = nullptr);

// Advances this simulated rank's clock by `seconds` (SMPI: smpi_execute_flops at the platform's
// host speed, simulate/platform.hpp).  Outside the SMPI build: mdtp::Error (nothing to charge).
void charge_simulated_seconds(double seconds);

}  // namespace mdtp::simulate
