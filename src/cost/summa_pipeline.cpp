#include "cost/summa_pipeline.hpp"

#include <algorithm>
#include <vector>

#include "cost/kernel_time.hpp"
#include "spec/names.hpp"

namespace mdtp::cost {

double summa_product_seconds(int q, const SummaStep& step) {
  double now = 0.0, link_free = 0.0;
  // A collective issued now starts once the link has finished the ones issued before it.
  const auto issue = [&](double seconds) { return link_free = std::max(now, link_free) + seconds; };
  const bool reduces = step.reduce > 0.0;
  std::vector<double> broadcast_done(static_cast<std::size_t>(q)), reduce_done(static_cast<std::size_t>(q));
  broadcast_done[0] = issue(step.broadcast);
  for (int s = 0; s < q; ++s) {
    const auto k = static_cast<std::size_t>(s);
    now = std::max(now, broadcast_done[k]);                       // wait(s)
    if (s + 1 < q) broadcast_done[k + 1] = issue(step.broadcast);  // issue(s + 1)
    now += step.gemm;
    if (reduces) {
      reduce_done[k] = issue(step.reduce);            // issue_and_retire(s): start reduce(s) ...
      if (s > 0) now = std::max(now, reduce_done[k - 1]);  // ... then finish reduce(s − 1)
    }
  }
  if (reduces) now = std::max(now, reduce_done[static_cast<std::size_t>(q - 1)]);  // finish(q − 1)
  return now;
}

SummaHidden summa_hidden_seconds(const Geometry& g, const TimeModel& model, const Cluster& cluster) {
  SummaHidden hidden;
  const Workload& w = g.workload();
  const int q = g.q();
  if (q < 2) return hidden;
  const auto call_seconds = [&](const char* group, CollectiveOp op, std::int64_t elements, DType dtype) {
    return predict_call(PlannedCall{phase::forward, group, op, g.group_size(group), elements, dtype}, g.topology(), model)
        .seconds;
  };
  // What the product's plan_step calls cost one after another, less what it holds the rank
  // beyond its GEMMs.
  const auto hidden_by = [&](const SummaStep& step) {
    const double listed = q * (step.broadcast + step.reduce);
    return listed - (summa_product_seconds(q, step) - q * step.gemm);
  };
  for (const LinearShape& s : g.linears()) {
    if (s.kind != LinearKind::summa) continue;  // a SUMMA grid's rows hold q ≥ 2 ranks (above)
    const DType dt = w.dtype;
    // C = A·B: X's block along the row, W's along the column (cost_model.cpp, summa_nn).
    hidden.forward += hidden_by({call_seconds("tp.row", CollectiveOp::broadcast, s.x.numel(), dt) +
                                     call_seconds("tp.col", CollectiveOp::broadcast, s.w.numel(), dt),
                                 0.0, gemm_kernel_seconds(s.x.rows, s.w.cols, s.x.cols, dt, cluster)});
    // dX = dY·Wᵀ: W's block along the column, dX's partial reduced along the row (summa_nt).
    hidden.backward_input += hidden_by({call_seconds("tp.col", CollectiveOp::broadcast, s.w.numel(), dt),
                                        call_seconds("tp.row", CollectiveOp::reduce, s.x.numel(), dt),
                                        gemm_kernel_seconds(s.x.rows, s.w.rows, s.w.cols, dt, cluster)});
    // dW += Xᵀ·dY: X's block along the row, dW's partial (a gradient sum) along the column.
    hidden.backward_weight += hidden_by({call_seconds("tp.row", CollectiveOp::broadcast, s.x.numel(), dt),
                                        call_seconds("tp.col", CollectiveOp::reduce, s.w.numel(), w.gradient_dtype()),
                                        gemm_kernel_seconds(s.w.rows, s.w.cols, s.x.rows, dt, cluster)});
  }
  return hidden;
}

}  // namespace mdtp::cost
