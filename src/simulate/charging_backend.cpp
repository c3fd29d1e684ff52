#include "simulate/charging_backend.hpp"

#ifdef MDTP_SMPI
#include <smpi/smpi.h>
#endif

#include "core/error.hpp"
#include "cost/kernel_time.hpp"
#include "run/simulation_context.hpp"
#include "simulate/platform.hpp"
#include "simulate/synthetic_allocator.hpp"

namespace mdtp::simulate {

ChargingBackend::ChargingBackend(std::unique_ptr<Backend> inner, cost::Cluster cluster, KernelCharge charge,
                                 std::shared_ptr<KernelTally> tally)
    : Backend(inner->allocator_ptr()),
      inner_(std::move(inner)),
      cluster_(std::move(cluster)),
      charge_(std::move(charge), std::move(tally)),
      name_(std::string(inner_->name()) + " (times charged as " + cluster_.gpu_name + ")") {}

void ChargingBackend::charge_stream(const char* kind, std::initializer_list<const Tensor*> touched) const {
  double bytes = 0;
  for (const Tensor* t : touched) bytes += static_cast<double>(t->bytes());
  charge_(kind, bytes, cost::stream_seconds(bytes, cluster_));
}

// A synthetic tensor (synthetic_allocator.hpp) holds nothing: its kernels are charged but not run
// (each kernel below runs only where what it writes holds values), it reads as zeros and
// assignments to it are dropped.
std::vector<double> ChargingBackend::do_to_f64(const Tensor& t) const {
  if (!t.holds_values()) return std::vector<double>(static_cast<std::size_t>(t.numel()), 0.0);
  return inner_->to_f64(t);
}
void ChargingBackend::do_assign_f64(Tensor& t, const std::vector<double>& values) const {
  if (t.holds_values()) inner_->assign_f64(t, values);
}
void ChargingBackend::do_fill(Tensor& t, double value) const {
  charge_stream("fill", {&t});
  if (t.holds_values()) inner_->fill(t, value);
}
void ChargingBackend::do_copy(const Tensor& src, Tensor& dst) const {
  charge_stream("copy", {&src, &dst});
  if (dst.holds_values()) inner_->copy(src, dst);
}
void ChargingBackend::do_convert(const Tensor& src, Tensor& dst) const {
  charge_stream("convert", {&src, &dst});
  if (dst.holds_values()) inner_->convert(src, dst);
}
void ChargingBackend::do_copy_block(const Tensor& src, std::int64_t sr0, std::int64_t sc0, Tensor& dst,
                                    std::int64_t dr0, std::int64_t dc0, std::int64_t rows, std::int64_t cols) const {
  const double bytes = 2.0 * static_cast<double>(rows * cols) * static_cast<double>(dtype_size(src.dtype()));
  charge_("copy_block", bytes, cost::stream_seconds(bytes, cluster_));
  if (dst.holds_values()) inner_->copy_block(src, sr0, sc0, dst, dr0, dc0, rows, cols);
}
void ChargingBackend::do_gemm(bool transpose_a, bool transpose_b, double alpha, const Tensor& a, const Tensor& b,
                              double beta, Tensor& c) const {
  const std::int64_t m = c.rows(), n = c.cols(), k = transpose_a ? a.rows() : a.cols();
  (void)transpose_b;
  // The epilogue writes C in its own dtype (f32 weight gradients under bf16) and, accumulating
  // (beta != 0: a weight gradient added into its buffer), reads it first.
  const double output_bytes = cost::epilogue_bytes(c.dtype(), beta != 0.0);
  const double bytes = static_cast<double>(m * k + k * n) * static_cast<double>(dtype_size(a.dtype())) +
                       static_cast<double>(m * n) * output_bytes;
  charge_("gemm", bytes, cost::gemm_kernel_seconds(m, n, k, a.dtype(), cluster_, 1, output_bytes));
  if (c.holds_values()) inner_->gemm(transpose_a, transpose_b, alpha, a, b, beta, c);
}
void ChargingBackend::do_axpy(double alpha, const Tensor& x, Tensor& y) const {
  charge_stream("axpy", {&x, &y, &y});
  if (y.holds_values()) inner_->axpy(alpha, x, y);
}
void ChargingBackend::do_scale(Tensor& x, double alpha) const {
  charge_stream("scale", {&x, &x});
  if (x.holds_values()) inner_->scale(x, alpha);
}
void ChargingBackend::do_add_row_vector(Tensor& y, const Tensor& row) const {
  charge_stream("add_row_vector", {&y, &y, &row});
  if (y.holds_values()) inner_->add_row_vector(y, row);
}
void ChargingBackend::do_column_sums(const Tensor& x, Tensor& out, double beta) const {
  charge_stream("column_sums", {&x, &out});
  if (out.holds_values()) inner_->column_sums(x, out, beta);
}
double ChargingBackend::do_sum_squares(const Tensor& x) const {
  charge_stream("sum_squares", {&x});
  return x.holds_values() ? inner_->sum_squares(x) : 0.0;
}
void ChargingBackend::do_gelu_forward(const Tensor& x, Tensor& y) const {
  charge_stream("gelu_forward", {&x, &y});
  if (y.holds_values()) inner_->gelu_forward(x, y);
}
void ChargingBackend::do_gelu_backward(const Tensor& x, const Tensor& dy, Tensor& dx) const {
  charge_stream("gelu_backward", {&x, &dy, &dx});
  if (dx.holds_values()) inner_->gelu_backward(x, dy, dx);
}
void ChargingBackend::do_row_mean_m2(const Tensor& x, Tensor& stats) const {
  charge_stream("row_mean_m2", {&x, &stats});
  if (stats.holds_values()) inner_->row_mean_m2(x, stats);
}
void ChargingBackend::do_merge_row_stats(const Tensor& stacked, int parts, std::int64_t count_per_part, double eps,
                                         Tensor& mean_rstd, bool centred) const {
  charge_stream("merge_row_stats", {&stacked, &mean_rstd});
  if (mean_rstd.holds_values()) inner_->merge_row_stats(stacked, parts, count_per_part, eps, mean_rstd, centred);
}
void ChargingBackend::do_layernorm_apply(const Tensor& x, const Tensor& mean_rstd, const Tensor& gamma,
                                         const Tensor& beta, Tensor& xhat, Tensor& y) const {
  charge_stream("layernorm_apply", {&x, &mean_rstd, &gamma, &beta, &xhat, &y});
  if (y.holds_values()) inner_->layernorm_apply(x, mean_rstd, gamma, beta, xhat, y);
}
void ChargingBackend::do_layernorm_backward_sums(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
                                                 Tensor& sums, bool centred) const {
  charge_stream("layernorm_backward_sums", {&dy, &xhat, &gamma, &sums});
  if (sums.holds_values()) inner_->layernorm_backward_sums(dy, xhat, gamma, sums, centred);
}
void ChargingBackend::do_layernorm_backward(const Tensor& dy, const Tensor& xhat, const Tensor& gamma,
                                            const Tensor& mean_rstd, const Tensor& sums, std::int64_t n, Tensor& dx,
                                            Tensor& dgamma, Tensor& dbeta) const {
  charge_stream("layernorm_backward", {&dy, &xhat, &gamma, &mean_rstd, &sums, &dx, &dgamma, &dgamma, &dbeta, &dbeta});
  if (dx.holds_values()) inner_->layernorm_backward(dy, xhat, gamma, mean_rstd, sums, n, dx, dgamma, dbeta);
}
void ChargingBackend::do_adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                                      const AdamWStep& step) const {
  // Reads param, grad, m, v; writes param, m, v.
  charge_stream("adamw_update", {&param, &grad, &m, &v, &param, &m, &v});
  if (param.holds_values()) inner_->adamw_update(param, grad, m, v, step);
}

cost::Cluster simulated_cluster() {
  const auto sim = run::simulation_from_environment();
  require(sim.has_value(), "this is the SMPI build of mdtp: run it through `mdtp simulate` (",
          run::kSimulationEnvironment, " is not set)");
  // Its ranks are the job's GPUs: one alone keeps the microbenchmark's rate, more the pace of the
  // slowest (cost::for_job), as `mdtp cost` prices the same job.
  return cost::for_job(cost::load_cluster(sim->cluster_path), sim->gpus);
}

std::function<std::unique_ptr<Backend>()> simulated_backend_factory(std::shared_ptr<KernelTally> tally) {
  const auto sim = run::simulation_from_environment();
  const bool real_values = !sim || sim->real_values;
  return [cluster = simulated_cluster(), real_values, tally]() -> std::unique_ptr<Backend> {
    return std::make_unique<ChargingBackend>(
        real_values ? make_host_backend() : make_host_backend(std::make_shared<SyntheticAllocator>()), cluster,
        charge_simulated_seconds, tally);
  };
}

void charge_simulated_seconds(double seconds) {
#ifdef MDTP_SMPI
  if (seconds > 0) smpi_execute_flops(seconds * kHostSpeed);
#else
  (void)seconds;
  throw_error("charge_simulated_seconds: this mdtp is not the SMPI build (configure with -DMDTP_SMPI=ON)");
#endif
}

}  // namespace mdtp::simulate
