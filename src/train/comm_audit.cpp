#include "train/comm_audit.hpp"

#include "comm/ledger_stats.hpp"
#include "train/step_comm_config.hpp"

namespace mdtp {

CommAudit::CommAudit(const TrainPlan& plan)
    : plan_(plan), model_(step_comm_model(plan, why_not_)), rows_(ledger_table()) {}

void CommAudit::after_step(std::int64_t step, bool first, TrainRig& rig, TrainResult& result) {
  const Mesh& mesh = rig.mesh();
  const std::vector<LedgerStat> stats = reduce_ledger_stats(rig.ledger(), rig.world(), mesh.wait_policy());
  add_ledger_rows(rows_, step, stats, model_);
  result.ledger = rig.ledger().summary();
  if (!first) return;
  first_step_lines_ = ledger_summary(stats, model_, why_not_) + "\n";
  // The paper's ZeRO figures beside rank 0's ledger and its own stage's plan.
  if (mesh.rank() != 0) return;
  std::optional<std::map<LedgerKey, LedgerTotals>> own;
  if (model_) own = cost::plan_step_comm(step_comm_config(plan_), rig.stage()).totals();
  const ZeroConfig& zero = plan_.zero;
  paper_traffic_ = cost::zero_paper_traffic(rig.engine().plan(), zero.stage, plan_.schedule.micro_batches,
                                            zero.keep_parameters, zero.reduce_per_micro_batch, result.ledger,
                                            own ? &*own : nullptr);
  first_step_lines_ += paper_traffic_.line() + "\n";
}

}  // namespace mdtp
