#pragma once
// The results of a training run: one /runs/NNNN-train group of the results file (docs/architecture.md)
// holding the provenance every run carries (code, machine, mesh, MPI, oversubscription), the
// training settings, how the run ended, the ZeRO paper's figures beside the ledger, the set-up
// cost, and the tables the observers filled (steps, ledger, pipeline, timeline, memory).  Rank 0
// writes; the provenance is gathered collectively (outside the ledger).
#include <map>
#include <string>

#include "io/table.hpp"
#include "train/comm_audit.hpp"
#include "train/train_rig.hpp"
#include "train/train_setup.hpp"
#include "train/trainer.hpp"

namespace mdtp {

struct RunEnding {
  std::string stopped_by;  // "non-finite", a signal's name, or ""
  std::int64_t skipped_nonfinite = 0;
  std::int64_t overflow_steps = 0;  // f16's dynamic loss scaling
};

// Collective over the world.  Appends the run to config.out (which must not be empty).
void write_train_results(const TrainConfig& config, const TrainPlan& plan, TrainRig& rig, const TrainResult& result,
                         const RunEnding& ending, const CommAudit& comm, const std::map<std::string, Table>& tables);

}  // namespace mdtp
