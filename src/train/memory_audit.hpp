#pragma once
// The memory audit of a training run: after the last step, what the allocator holds per category
// and its peaks, held against the models — the ZeRO engine's bucket plan (parameters, gradients,
// optimizer state, master weights), the kept activations of the stage's schedule, the allocator's
// activation peak inside a step, ZeRO-3's gathered parameters inside a pass, and the full gradient
// buckets inside a step (docs/memory.md).  An observer of the step loop: it reads the run, never
// changes it.
#include "io/table.hpp"
#include "train/train_rig.hpp"
#include "train/train_setup.hpp"
#include "train/trainer.hpp"

namespace mdtp {

// Collective over the world (every rank's rows are gathered, outside the ledger).  Fills `result`'s
// memory fields and returns the `memory` table of the results file (one row per world rank and
// category or measure, with held, peak and modelled bytes; -1 where nothing is modelled).
Table audit_memory(TrainResult& result, TrainRig& rig, const TrainPlan& plan);

}  // namespace mdtp
