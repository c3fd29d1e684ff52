#pragma once
// A calibration's prediction held against a sweep it was not fitted on (`mdtp calibrate
// --predict-with`): per measured point, the time the time model predicts for one such call
// (cost::predict_on_link, the same function the bench and step models use) beside the measured
// time per call (the maximum over ranks), and the ratio measured / predicted.  Sweeping other
// sizes than the calibration's, with --sync-timing, is how the model is held against transfers
// at sizes the fit never saw (docs/performance-model.md).
//   table "prediction": group, group_size, op, bytes, measured_s, predicted_s, ratio, algorithm
#include <string>
#include <vector>

#include "calibrate/collective_sweep.hpp"
#include "cost/time_model.hpp"
#include "io/table.hpp"

namespace mdtp::calibrate {

struct PointPrediction {
  const SweepPoint* point = nullptr;
  double predicted_seconds = 0.0;
  std::string algorithm;
  double ratio() const;  // measured (max over ranks) / predicted; 0 when nothing was predicted
};

std::vector<PointPrediction> predict_points(const std::vector<SweepPoint>& points, const cost::TimeModel& model);

Table prediction_table(const std::vector<SweepPoint>& points, const cost::TimeModel& model);

// The terminal form: one line per point, then per op and over all points at ≥ 1 MiB the largest
// |ratio − 1|.
std::string describe_prediction(const std::vector<SweepPoint>& points, const cost::TimeModel& model,
                                const std::string& source);

}  // namespace mdtp::calibrate
