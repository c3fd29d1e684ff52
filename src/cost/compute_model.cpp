#include "cost/compute_model.hpp"

#include "cost/geometry.hpp"
#include "cost/time_model.hpp"
#include "spec/names.hpp"

namespace mdtp::cost {

namespace {

void add_linear(const Geometry& g, const LinearShape& s, std::vector<PlannedGemm>& fwd, std::vector<PlannedGemm>& bwd) {
  const std::int64_t B = s.full_rows, K = s.in_features, N = s.out_features;
  auto f = [&](std::int64_t m, std::int64_t n, std::int64_t k, int count = 1) {
    fwd.push_back(PlannedGemm{phase::forward, s.name, "Y=XW", m, n, k, count});
  };
  auto dx = [&](std::int64_t m, std::int64_t n, std::int64_t k, int count = 1) {
    bwd.push_back(PlannedGemm{phase::backward, s.name, "dX=dYWt", m, n, k, count});
  };
  auto dw = [&](std::int64_t m, std::int64_t n, std::int64_t k, int count = 1) {
    bwd.push_back(PlannedGemm{phase::backward, s.name, "dW=XtdY", m, n, k, count});
  };
  switch (s.kind) {
    case LinearKind::serial:
      f(B, N, K);
      dw(K, N, B);
      dx(B, K, N);
      return;
    case LinearKind::column_1d:  // the gathered X has all B rows, sequence-parallel or not
      f(B, s.w.cols, K);
      dw(K, s.w.cols, B);
      dx(B, K, s.w.cols);
      return;
    case LinearKind::row_1d:
      f(B, N, s.w.rows);
      dw(s.w.rows, N, B);
      dx(B, s.w.rows, N);
      return;
    case LinearKind::summa: {  // q steps of each block product (tp2d/summa.cpp)
      const int q = g.q();
      f(s.x.rows, s.w.cols, s.x.cols, q);
      dx(s.x.rows, s.w.rows, s.w.cols, q);
      dw(s.w.rows, s.w.cols, s.x.rows, q);
      return;
    }
    case LinearKind::cube_3d: {  // on the gathered blocks X(j,k) [B/q, K/q], W(k,i) [K/q, N/q]
      const std::int64_t q = g.q();
      f(B / q, N / q, K / q);
      dx(B / q, K / q, N / q);
      dw(K / q, N / q, B / q);
      return;
    }
  }
}

}  // namespace

std::vector<PlannedGemm> plan_gemms(const Workload& workload) {
  Geometry g(workload);
  std::vector<PlannedGemm> fwd, bwd;
  const auto& linears = g.linears();
  for (const auto& l : linears) add_linear(g, l, fwd, bwd);
  // Backward runs the Linears in reverse; keep the list in execution order.
  std::vector<PlannedGemm> out = fwd;
  for (std::size_t i = linears.size(); i-- > 0;)
    for (const auto& gemm : bwd)
      if (gemm.layer == linears[i].name) out.push_back(gemm);
  return out;
}

double total_flops(const std::vector<PlannedGemm>& gemms) {
  double sum = 0.0;
  for (const auto& g : gemms) sum += g.flops();
  return sum;
}

double gemm_seconds(const std::vector<PlannedGemm>& gemms, DType dtype, const TimeModel& model) {
  return total_flops(gemms) / model.gemm_rate(dtype);
}

}  // namespace mdtp::cost
