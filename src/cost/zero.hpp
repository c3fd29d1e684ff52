#pragma once
// ZeRO (DeepSpeed) memory per rank and communication per step over a data-parallel group of N_d
// ranks, docs/theory.md §4.  Ψ parameters; bytes per parameter (p), per gradient (g) and of
// optimizer state (K) are inputs (the paper: 2, 2, 12 — fp16 values and gradients, fp32 master,
// momentum and variance).
//
//   stage              memory per rank            communication per step (elements)
//   0 baseline DP      (p + g + K)·Ψ              2Ψ  all-reduce of gradients (= RS + AG)
//   1 optimizer        p·Ψ + g·Ψ + K·Ψ/N_d        2Ψ  reduce-scatter gradients + all-gather params
//   2 + gradients      p·Ψ + (g + K)·Ψ/N_d        2Ψ
//   3 + parameters     (p + g + K)·Ψ/N_d          3Ψ  all-gather params fwd and bwd + reduce-scatter
//
// Communication is counted as the paper counts it, in parameter elements (the volume one rank
// sends and receives with bandwidth-optimal algorithms, up to (N_d−1)/N_d); bytes weigh the
// gradient traffic by g and the parameter traffic by p.  Example Ψ = 7.5e9, N_d = 64, 2/2/12:
// 120, 31.4, 16.6, 1.9 GB (1 GB = 1e9 B).
#include <map>
#include <string>
#include <vector>

#include "comm/ledger.hpp"
#include "plan/bucket_plan.hpp"

namespace mdtp::cost {

// The inputs of the ZeRO paper's per-stage table (Rajbhandari et al. 2020: memory and traffic per
// stage from Ψ, N_d and the bytes per element), `mdtp cost --zero-table`; a run's own ZeRO options
// are the run spec's ZeroOptions.
struct ZeroPaperInputs {
  double parameters = 0.0;  // Ψ
  int data_parallel = 1;    // N_d
  double param_bytes = 2.0;
  double grad_bytes = 2.0;
  double optimizer_bytes = 12.0;  // K
};

struct ZeroStageCost {
  int stage = 0;
  std::string name;
  double memory_bytes = 0.0;   // per rank
  double comm_elements = 0.0;  // per step, parameter elements (2Ψ or 3Ψ)
  double comm_bytes = 0.0;     // per step, bytes
  std::string memory_formula, comm_formula;
};

// One stage (0–3); mdtp::Error for another stage or a bad configuration.
ZeroStageCost zero_stage_cost(const ZeroPaperInputs& config, int stage);
// Stages 0, 1, 2, 3.
std::vector<ZeroStageCost> zero_costs(const ZeroPaperInputs& config);

// The paper's data-parallel traffic of one step beside a rank's ledger and the step plan's, in
// bus bytes (what each rank sends, docs/zero.md §4.1).  The paper's figure is
// k·Ψ·(n−1)/n·bytes with k = 2 at stages 0–2 (all-reduce, or reduce-scatter + all-gather) and
// k = 3 at stage 3 (all-gather in forward and in backward + reduce-scatter), summed per bucket of
// the rank's plan (Ψ_b its parameter elements, n_b the ranks it is sharded over: dp, or dp × depth
// for 2.5D weights).  The ledger and the model count the grad-sync, optimizer and param-gather
// calls over the shard groups.  `why` names what separates the figures.
struct ZeroPaperTraffic {
  double psi = 0.0;              // Ψ: parameter elements of the rank's buckets (padding excluded)
  int factor = 2;                // k
  double paper_bus_bytes = 0.0;
  double ledger_bus_bytes = 0.0;
  double model_bus_bytes = -1.0;  // -1 without a model
  std::string why;
  std::string line() const;       // one line for a run's log
};
// `model` may be null.  `micro_batches` and `keep_parameters` matter at stage 3,
// `reduce_per_micro_batch` (m reduce-scatters per bucket) at stages 2–3.
ZeroPaperTraffic zero_paper_traffic(const BucketPlan& plan, int stage, int micro_batches, bool keep_parameters,
                                    bool reduce_per_micro_batch, const std::map<LedgerKey, LedgerTotals>& ledger,
                                    const std::map<LedgerKey, LedgerTotals>* model);

}  // namespace mdtp::cost
