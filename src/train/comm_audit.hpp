#pragma once
// The communication audit of a training run: after every step, the ledger reduced over the ranks
// is written beside the whole-step byte plan (cost/gpt_step_comm.hpp, derived from the algorithms,
// never from a ledger); after the first, rank 0 prints how many (phase, group, op) keys equal the
// plan and the ZeRO paper's figures beside its own ledger (cost/zero.hpp).  Where the plan does not
// cover a run, the record says why instead of skipping the comparison silently.  An observer of
// the step loop: it reads the ledger, never changes what the step does.
#include <map>
#include <optional>
#include <string>

#include "comm/ledger.hpp"
#include "cost/zero.hpp"
#include "io/table.hpp"
#include "train/train_rig.hpp"
#include "train/train_setup.hpp"
#include "train/trainer.hpp"

namespace mdtp {

class CommAudit {
 public:
  explicit CommAudit(const TrainPlan& plan);
  // Collective over the world (the ledger's statistics are reduced outside the ledger).  Adds the
  // step's rows, keeps this rank's totals in `result.ledger`; after the first step composes the
  // summary line and (rank 0) the ZeRO paper's figures, which first_step_lines() returns.
  void after_step(std::int64_t step, bool first, TrainRig& rig, TrainResult& result);
  // The lines the loop prints after the first step ("" before it, and after it on ranks but 0 the
  // paper's line is left out).
  const std::string& first_step_lines() const { return first_step_lines_; }

  Table& table() { return rows_; }
  const cost::ZeroPaperTraffic& paper_traffic() const { return paper_traffic_; }
  // "" when the whole-step plan covers the run; else why the ledger has no model beside it.
  const std::string& uncovered_reason() const { return why_not_; }

 private:
  const TrainPlan& plan_;
  std::string why_not_;
  std::optional<std::map<LedgerKey, LedgerTotals>> model_;  // the largest stage's, per key
  Table rows_;
  cost::ZeroPaperTraffic paper_traffic_;  // rank 0's, after the first step
  std::string first_step_lines_;
};

}  // namespace mdtp
