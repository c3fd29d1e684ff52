#pragma once
// The fitting half of `mdtp calibrate`: from the sweep (collective_sweep.hpp) and a GEMM rate to a
// cost::Calibration (cost/calibration.hpp), with the quality of every fit.
//
//   collective_fits  per (op, link class, group size, regime): t = α + β·S by least squares on
//                    the relative residual (alpha_beta_fit.hpp).  A regime is a maximal range of
//                    swept sizes over which the time model says MPICH runs one algorithm
//                    (cost::select_algorithm): its first regime starts at 0 bytes, its last has no
//                    upper end, and a boundary sits at the first swept size of the next regime.
//                    With cache knees K1 < K2, a regime is also cut at the first swept size ≥ each:
//                    the same algorithm runs at three rates — from the last-level cache below K1,
//                    partly from DRAM between, wholly from DRAM past K2 (cache_knees says why
//                    K1 = L3 / (2 · ranks on the node) and K2 = L3).
//   link_params      per link class: point-to-point α, β such that the algorithm formulas
//                    (cost::algorithm_seconds, linear in α and β) best match every point — what
//                    the model uses for group sizes and ops that were not swept.
//   gemm_flops       the measured rate per dtype (all ranks multiplying at once, mean over ranks).
#include <mpi.h>

#include <string>
#include <vector>

#include "calibrate/calibration_io.hpp"
#include "calibrate/collective_sweep.hpp"

namespace mdtp::calibrate {

// Times a size³ GEMM (best of 3 after one warm-up) in f32 and f64 on every rank at once.
// Collective over `world`.
std::vector<GemmRate> measure_gemm_rates(std::int64_t size, const Mesh& mesh, MPI_Comm world);

CalibrationResult fit_calibration(const std::vector<SweepPoint>& points, const std::vector<GemmRate>& gemm,
                                  const cost::AlgorithmSelection& selection = {},
                                  const std::vector<std::int64_t>& cache_knees = {});

// The message sizes at which a collective among `local_ranks` ranks of one node changes rate:
//   K1 = L3 / (2 · local_ranks): each rank holds its buffer and a receive (or staging) buffer of
//        about the message's size, so past K1 the node's working set 2 · local_ranks · S no
//        longer fits in the shared last-level cache and part of every pass comes from DRAM;
//   K2 = L3: one message alone is larger than the cache, and every pass streams from DRAM.
// (32 MiB L3, 2 ranks: 8 MiB and 32 MiB.)  The L3 size comes from
// /sys/devices/system/cpu/cpu0/cache/index3/size; empty (no knees) when it cannot be read.
std::vector<std::int64_t> cache_knees(int local_ranks);

// The tables of a calibrate run: "sweep" (every point, with the time the fitted calibration
// predicts for it — model_s — and the link-parameter formula's — formula_s) and those of
// calibration_tables().
std::map<std::string, Table> calibrate_run_tables(const std::vector<SweepPoint>& points, const CalibrationResult& r,
                                                  const cost::AlgorithmSelection& selection = {});

// Human-readable fit summary for the terminal.
std::string describe_fit(const CalibrationResult& r);

}  // namespace mdtp::calibrate
