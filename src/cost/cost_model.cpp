// plan_step: the collective list of each algorithm, written from the algorithms' descriptions
// (tp1d/mode_1d.hpp, tp2d/summa.hpp, tp3d/linear_3d.hpp, tp/layernorm.hpp, tp/parameter.hpp),
// never from a ledger.  The size-1 rules follow the code: SUMMA, 3D, LayerNorm, the 1D
// all-reduces and reduce_gradients skip a group of one rank, while 1d-sp's all-gathers and
// reduce-scatters are always issued (a one-rank call is still recorded).
#include "cost/cost_model.hpp"

#include "cost/geometry.hpp"
#include "core/error.hpp"
#include "spec/names.hpp"

namespace mdtp::cost {

namespace {

class Planner {
 public:
  Planner(const Geometry& g, std::vector<PlannedCall>& out) : g_(g), out_(out) {}

  void call(const std::string& phase, const std::string& group, CollectiveOp op, std::int64_t elements,
            DType dtype, bool input_regather = false) {
    out_.push_back(PlannedCall{phase, group, op, g_.group_size(group), elements, dtype, weight_pass_, input_regather});
  }
  bool alone(const std::string& group) const { return g_.group_size(group) == 1; }

  void linear_forward(const LinearShape& s) {
    const DType dt = g_.workload().dtype;
    const std::int64_t B = s.full_rows, K = s.in_features, N = s.out_features;
    switch (s.kind) {
      case LinearKind::serial: return;
      case LinearKind::column_1d:
        // gather X's rows
        if (g_.sequence_parallel()) call(phase::forward, group::tp, CollectiveOp::all_gather, B * K, dt);
        return;
      case LinearKind::row_1d:
        if (g_.sequence_parallel())
          call(phase::forward, group::tp, CollectiveOp::reduce_scatter, B * N, dt);  // partial Y → row shards
        else if (!alone(group::tp))
          call(phase::forward, group::tp, CollectiveOp::all_reduce, B * N, dt);  // Megatron's g
        return;
      case LinearKind::summa:
        if (alone("tp.row")) return;
        for (int s_step = 0; s_step < g_.q(); ++s_step) {  // summa_nn(X, W)
          call(phase::forward, "tp.row", CollectiveOp::broadcast, s.x.numel(), dt);
          call(phase::forward, "tp.col", CollectiveOp::broadcast, s.w.numel(), dt);
        }
        return;
      case LinearKind::cube_3d: {
        if (alone("tp.weight")) return;
        const std::int64_t q2 = static_cast<std::int64_t>(g_.q()) * g_.q();
        call(phase::forward, s.input_group, CollectiveOp::all_gather, B * K / q2, dt);   // X(j,k)
        call(phase::forward, "tp.weight", CollectiveOp::all_gather, K * N / q2, dt);     // W(k,i)
        call(phase::forward, s.output_group, CollectiveOp::reduce_scatter, B * N / q2, dt);  // Y
        return;
      }
    }
  }

  // The backward-input pass (B): dX and the collectives it needs.
  void linear_backward_input(const LinearShape& s) {
    const DType dt = g_.workload().dtype;
    const std::int64_t B = s.full_rows, K = s.in_features, N = s.out_features;
    switch (s.kind) {
      case LinearKind::serial: return;
      case LinearKind::column_1d:
        if (g_.sequence_parallel())
          call(phase::backward, group::tp, CollectiveOp::reduce_scatter, B * K, dt);  // dX → row shards
        else if (!alone(group::tp))
          call(phase::backward, group::tp, CollectiveOp::all_reduce, B * K, dt);  // Megatron's f
        return;
      case LinearKind::row_1d:
        if (g_.sequence_parallel()) call(phase::backward, group::tp, CollectiveOp::all_gather, B * N, dt);  // dY's rows
        return;
      case LinearKind::summa:
        if (alone("tp.row")) return;
        summa_reduce_product("tp.col", s.w.numel(), "tp.row", s.x.numel(), dt);  // dX = summa_nt(dY, W)
        return;
      case LinearKind::cube_3d: {
        if (alone("tp.weight")) return;
        const std::int64_t q2 = static_cast<std::int64_t>(g_.q()) * g_.q();
        call(phase::backward, s.output_group, CollectiveOp::all_gather, B * N / q2, dt);  // dY
        if (!g_.keep_gathered_3d())
          call(phase::backward, "tp.weight", CollectiveOp::all_gather, K * N / q2, dt);  // W again
        call(phase::backward, s.input_group, CollectiveOp::reduce_scatter, B * K / q2, dt);  // dX
        return;
      }
    }
  }

  // The weight pass (W): dW and the collectives it needs (reads no weight values).
  void linear_backward_weight(const LinearShape& s) {
    const DType dt = g_.workload().dtype;
    const std::int64_t B = s.full_rows, K = s.in_features, N = s.out_features;
    switch (s.kind) {
      case LinearKind::serial:
      case LinearKind::row_1d: return;
      case LinearKind::column_1d:
        if (g_.sequence_parallel())
          call(phase::backward, group::tp, CollectiveOp::all_gather, B * K, dt, /*input_regather=*/true);  // X again
        return;
      case LinearKind::summa:
        if (alone("tp.row")) return;
        weight_pass_ = true;
        // dW += summa_tn(X, dY): its partial sums are gradient sums, in the gradients' dtype.
        summa_reduce_product("tp.row", s.x.numel(), "tp.col", s.w.numel(), g_.workload().gradient_dtype());
        weight_pass_ = false;
        return;
      case LinearKind::cube_3d: {
        if (alone("tp.weight")) return;
        const std::int64_t q2 = static_cast<std::int64_t>(g_.q()) * g_.q();
        weight_pass_ = true;
        if (!g_.keep_gathered_3d())
          call(phase::backward, s.input_group, CollectiveOp::all_gather, B * K / q2, dt);  // X again
        call(phase::backward, "tp.weight", CollectiveOp::reduce_scatter, K * N / q2,
             g_.workload().gradient_dtype());  // dW, a gradient sum
        weight_pass_ = false;
        return;
      }
    }
  }

  // q broadcasts and q reductions, recorded as bcast(0), then bcast(j) reduce(j−1) for
  // j = 1 … q−1, then reduce(q−1): step j's reduce completes during step j+1 (tp2d/summa.hpp).
  // The broadcasts carry activations or weights (the data's dtype), the reductions the product's.
  void summa_reduce_product(const std::string& bcast_group, std::int64_t bcast_elements,
                            const std::string& reduce_group, std::int64_t reduce_elements, DType reduce_dtype) {
    const DType dt = g_.workload().dtype;
    call(phase::backward, bcast_group, CollectiveOp::broadcast, bcast_elements, dt);
    for (int j = 1; j < g_.q(); ++j) {
      call(phase::backward, bcast_group, CollectiveOp::broadcast, bcast_elements, dt);
      call(phase::backward, reduce_group, CollectiveOp::reduce, reduce_elements, reduce_dtype);
    }
    call(phase::backward, reduce_group, CollectiveOp::reduce, reduce_elements, reduce_dtype);
  }

  // One all-gather of the per-row (mean, M2) partials forward, one all-reduce of the per-row
  // backward sums; both float64 [rows, 2] whatever the data type.
  void layernorm_forward(const LayerNormShape& s) {
    if (s.hidden_group.empty() || alone(s.hidden_group)) return;
    call(phase::forward, s.hidden_group, CollectiveOp::all_gather, s.x.rows * 2 * g_.group_size(s.hidden_group),
         DType::f64);
  }
  void layernorm_backward(const LayerNormShape& s) {
    if (s.hidden_group.empty() || alone(s.hidden_group)) return;
    call(phase::backward, s.hidden_group, CollectiveOp::all_reduce, s.x.rows * 2, DType::f64);
  }

  // reduce_gradients: per parameter, its partial groups, then the data-parallel group.
  void grad_sync() {
    const DType dt = g_.workload().gradient_dtype();
    const std::string& dp = g_.workload().data_parallel_group;
    for (const ParamShard& p : g_.params()) {
      for (const auto& group : p.partial_grad_over)
        if (!alone(group)) call(phase::grad_sync, group, CollectiveOp::all_reduce, p.elements, dt);
      if (!dp.empty() && !alone(dp)) call(phase::grad_sync, dp, CollectiveOp::all_reduce, p.elements, dt);
    }
  }

 private:
  const Geometry& g_;
  std::vector<PlannedCall>& out_;
  bool weight_pass_ = false;  // the calls being listed belong to the weight pass
};

}  // namespace

std::vector<PlannedCall> plan_step(const Workload& workload) {
  Geometry g(workload);
  std::vector<PlannedCall> plan;
  Planner p(g, plan);
  const auto& linears = g.linears();
  for (const auto& l : linears) p.linear_forward(l);
  for (const auto& n : g.layernorms()) p.layernorm_forward(n);
  // A layer's fused backward is its backward-input pass (every Linear, last first) and then its
  // weight pass (same order): tp/mlp.cpp, tp/linear.cpp.
  for (auto it = linears.rbegin(); it != linears.rend(); ++it) p.linear_backward_input(*it);
  for (auto it = linears.rbegin(); it != linears.rend(); ++it) p.linear_backward_weight(*it);
  for (const auto& n : g.layernorms()) p.layernorm_backward(n);
  p.grad_sync();
  return plan;
}

LedgerEntry to_ledger_entry(const PlannedCall& call) {
  return make_ledger_entry(call.op, call.group, call.group_size, call.elements, call.dtype, call.phase);
}

std::map<LedgerKey, LedgerTotals> summarize(const std::vector<PlannedCall>& plan) {
  CommLedger ledger;  // the very totals the ledger computes, so the conventions cannot drift
  for (const auto& call : plan) ledger.record(to_ledger_entry(call));
  return ledger.summary();
}

std::vector<PlannedCall> repeat_plan(const std::vector<PlannedCall>& plan, int times) {
  require(times >= 1, "a plan is repeated at least once; got times=", times);
  std::vector<PlannedCall> out;
  out.reserve(plan.size() * static_cast<std::size_t>(times));
  for (int t = 0; t < times; ++t) out.insert(out.end(), plan.begin(), plan.end());
  return out;
}

}  // namespace mdtp::cost
