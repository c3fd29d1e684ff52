#pragma once
// The tables of one `mdtp bench` run (one workload: mode × sizes), measured beside modelled, as
// written to /runs/<NNNN>-bench (README, "Results files"):
//   comm     per (phase, group, op), per step: calls, logical and bus bytes and seconds measured
//            (mean and max over ranks) and modelled; bytes_match = 1 when measured bytes (mean
//            and max) and calls equal the model exactly; wait_mean/wait_max: the wait for the
//            last peer (skew), apart from seconds (the transfer) when synchronised_calls > 0
//            (sync timing, comm/ledger.hpp), else 0 and seconds is issue to completion
//   steps    per (rep, phase) incl. "step": wall, comm, compute, gemm, exposed, wait seconds, mean/max over ranks
//            (layer_runner.hpp defines each)
//   phases   per phase incl. "step", averaged over reps: measured (max over ranks) vs modelled
//            communication, compute and total seconds, and the measured wait (skew)
//   memory   per category incl. "total": bytes after setup and peak during the timed steps
//            (mean/max over ranks) vs the memory model
//   check    per tensor: relative error against the serial recomputation, tolerance, passed
//   summary  one row: the comparison printed by the driver (rows: per data-parallel replica,
//            global_rows: the whole batch, equal across modes)
#include <map>
#include <string>

#include "bench/layer_runner.hpp"
#include "bench/model_prediction.hpp"
#include "io/table.hpp"

namespace mdtp::bench {

struct BenchSummary {
  double bytes_measured = 0, bytes_model = 0;        // logical bytes per step per rank (mean)
  bool bytes_match = true;                           // every key equal, calls too
  double comm_measured = 0, comm_model = 0;          // seconds per step (max over ranks, mean over reps)
  double wait_measured = 0;                          // the wait for the last peer (sync timing), same statistic
  double compute_measured = 0, compute_model = 0;
  double step_measured = 0, step_model = 0;
  double peak_bytes = 0, peak_model_bytes = 0;       // max over ranks; model: per rank
};

BenchSummary summarize(const LayerMeasurement& m, const Prediction& p);

// All tables of the run, by name.
std::map<std::string, Table> bench_tables(const LayerMeasurement& m, const Prediction& p, const BenchSummary& s);

// Bench-specific attributes added to the provenance (layer, sizes, reps, check verdict, …).
void add_bench_attributes(Attributes& a, const LayerMeasurement& m, const BenchSummary& s);

// The printed comparison: a header line and one row per run; with sync timing, a second line
// per run with the transfer and the wait (skew) apart.
std::string skew_line(const LayerMeasurement& m, const BenchSummary& s);
std::string summary_header();
std::string summary_row(const LayerMeasurement& m, const BenchSummary& s);

}  // namespace mdtp::bench
