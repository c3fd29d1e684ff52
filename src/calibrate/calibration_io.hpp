#pragma once
// The one calibration schema: a cost::Calibration in a results file, written by
// calibration_tables() (`mdtp calibrate`) and read back by read_calibration()/load_calibration()
// (`mdtp cost --calibration`, `mdtp bench --calibration`) — one writer, one reader, so they cannot
// disagree.  A /runs/NNNN-calibrate group holds, besides the raw "sweep" table
// (collective_sweep.hpp):
//   link_params      link (intra-node|inter-node), alpha_s, beta_s_per_byte, points, rms_rel_error
//                    point-to-point α/β per link class, fitted through the time model's
//                    algorithm formulas (cost/time_model.hpp) over every op and size
//   collective_fits  op, link, group_size (0 = any size), regime, min_bytes, max_bytes
//                    (-1 = unbounded), alpha_s, beta_s_per_byte, points, rms_rel_error
//                    t = α + β·S (S logical bytes) per op, group size and size regime, the regime
//                    being the range of sizes over which MPICH runs one algorithm
//   gemm_rates       dtype, m, n, k, flops_mean, flops_min   (flop/s per rank, all ranks at once;
//                    the time model uses flops_mean)
// (Here rather than in src/cost: the cost layer does not link HDF5.)
#include <map>
#include <string>

#include "cost/time_model.hpp"
#include "io/results_file.hpp"

namespace mdtp::calibrate {

inline constexpr const char* kCalibrationRunKind = "calibrate";

struct LinkParameters {
  cost::TimeModel model;  // model.calibration holds what was loaded
  std::string source;     // "FILE:/runs/NNNN-calibrate", or says the defaults are used
  bool calibrated = false;
  bool oversubscribed = false;  // the calibration itself was taken oversubscribed
};

// The time model's defaults, flagged as uncalibrated.
LinkParameters default_link_parameters();

// "FILE.h5" (its latest calibrate run) or "FILE.h5:/runs/NNNN-calibrate".  Reads the file on the
// calling rank (call it on every rank: each raises the same mdtp::Error for a bad spec).
LinkParameters load_calibration(const std::string& spec);

// The three tables above, from a Calibration plus per-fit diagnostics (points, rms error).
struct FitQuality {
  int points = 0;
  double rms_relative_error = 0.0;
};
struct GemmRate {
  DType dtype = DType::f32;
  std::int64_t m = 0, n = 0, k = 0;
  double flops_mean = 0.0, flops_min = 0.0;
};
struct CalibrationResult {
  cost::Calibration calibration;
  std::map<LinkClass, FitQuality> link_quality;
  std::vector<FitQuality> fit_quality;  // one per calibration.fits entry
  std::vector<std::string> fit_regimes;  // algorithm name per calibration.fits entry
  std::vector<GemmRate> gemm;
};
std::map<std::string, Table> calibration_tables(const CalibrationResult& result);
// The calibration stored in group `run` ("/runs/NNNN-calibrate") of `path`.
cost::Calibration read_calibration(const std::string& path, const std::string& run);

}  // namespace mdtp::calibrate
