#pragma once
// The shared layer runner of the drivers: one (mode, mesh, layer, sizes) workload measured.
//
//   setup      mesh (collective), mode, layer with initialised parameters, this rank's shards of
//              X and dY (generated in place: step_inputs.hpp) — none of it timed
//   check      one untimed step with the ledger off; Y, dX and every synchronised gradient are
//              gathered and compared on rank 0 with the serial recomputation (layer_check.hpp)
//   warm-up    `warmup` steps, ledger off
//   timed      `reps` steps, ledger on, peaks of the memory tracker reset just before; before
//              each step a barrier (outside the ledger) aligns the ranks
// The workload's rows are those of one data-parallel replica (cost::Workload::rows); replica d
// computes global rows [d·rows, (d+1)·rows).  A step is forward, backward and grad-sync
// (reduce_gradients over the partial groups, then workload.data_parallel_group), each under its
// PhaseScope.  Per phase and step this rank measures:
//   wall      steady-clock time of the phase
//   comm      the ledger's seconds of the calls the phase issued, each issue → completion,
//             summed: calls that overlap (SUMMA's pipelined broadcasts, 3D's gathers) are each
//             counted whole, so comm can exceed wall — the same convention as the time model's
//             sum over calls, so the two compare like for like
//   compute   kernel time, timed directly around each Backend call (timed_backend.hpp): gemm +
//             the rest (elementwise, reductions, copies)
//   wait      with sync timing on (RunSettings::sync_timing, comm/ledger.hpp), the time the
//             phase's blocking collectives waited at their barrier for the last peer to arrive:
//             skew between ranks, kept out of comm, which is then the transfer alone
//   exposed   wall − compute: the time this rank was not computing — waiting for communication,
//             bookkeeping, and on an oversubscribed node time spent descheduled
// Every timed step's output is also compared with the checked step's (sum of squares of this
// rank's Y and dX shards), so a later repetition cannot silently differ from the checked one.
#include <mpi.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/layer_check.hpp"
#include "core/backend.hpp"
#include "run/provenance.hpp"
#include "comm/ledger_stats.hpp"
#include "cost/cost_model.hpp"
#include "spec/names.hpp"

namespace mdtp::bench {

struct RunSettings {
  int warmup = 2;
  int reps = 5;
  bool check = true;
  std::uint64_t seed = 1234;        // parameters
  std::uint64_t input_seed = 4321;  // X and dY
  bool sync_timing = false;         // time blocking collectives after a barrier (wait vs transfer)
  // The backend the layer runs on; null: the host backend (the SMPI build passes one that charges
  // modelled kernel times to the simulated clock, docs/simulate.md).
  std::function<std::unique_ptr<Backend>()> make_backend;
};

inline const std::vector<std::string>& step_phases() {
  static const std::vector<std::string> phases{phase::forward, phase::backward, phase::grad_sync};
  return phases;
}

// One (repetition, phase) over the ranks.  phase "step" is the whole step (per-rank sums first).
struct StepTiming {
  int rep = 0;
  std::string phase;
  MeanMax wall, comm, compute, gemm, exposed;  // compute = gemm + other kernels; exposed = wall − compute
  MeanMax wait;  // the wait for the last peer of the phase's synchronised calls (0 without sync timing)
};

struct MemoryStat {
  std::string category;  // mem_category_name, or "total" (peak of the sum)
  MeanMax after_setup;   // bytes held when the timed steps start
  MeanMax peak;          // bytes, peak during the timed steps
};

struct LayerMeasurement {
  cost::Workload workload;
  RunSettings settings;
  Attributes provenance;
  std::vector<StepTiming> steps;
  std::vector<LedgerStat> comm;  // totals over the `reps` timed steps (divide by reps per step)
  std::vector<MemoryStat> memory;
  CheckResult check;
  // Largest relative deviation of a timed step's output checksums from the checked step's, over
  // ranks and steps (0 when every step reproduced it exactly).
  double repeat_deviation = 0.0;
  std::string wait_policy;
  double oversubscription = 1.0;
};

// Validates the settings, then runs the workload on `world` (collective: every rank calls it with
// the same arguments).  Configuration errors are raised on every rank before any collective.
LayerMeasurement run_layer_bench(const cost::Workload& workload, const RunSettings& settings, MPI_Comm world,
                                 const run::RunDescription& run);

// Checks a workload against the rules of its mode without MPI (divisibility of rows and features
// by the mesh), raising an mdtp::Error naming the offending size.
void validate_workload(const cost::Workload& workload);

}  // namespace mdtp::bench
