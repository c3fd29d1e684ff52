#include "calibrate/sweep_prediction.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "cost/calibration.hpp"

namespace mdtp::calibrate {

double PointPrediction::ratio() const {
  return predicted_seconds > 0 ? point->seconds_max / predicted_seconds : 0.0;
}

std::vector<PointPrediction> predict_points(const std::vector<SweepPoint>& points, const cost::TimeModel& model) {
  std::vector<PointPrediction> out;
  for (const auto& p : points) {
    // The sweep's element type, from the bytes per element it moved (f32 or f64).
    const DType dtype = p.elements > 0 && p.bytes / p.elements == 8 ? DType::f64 : DType::f32;
    const cost::CallEstimate exact =
        cost::predict_on_link(p.op, p.group_size, p.elements, dtype, {.link = cost::parse_link_class(p.link)}, model);
    out.push_back({&p, exact.seconds, cost::algorithm_name(exact.algorithm)});
  }
  return out;
}

Table prediction_table(const std::vector<SweepPoint>& points, const cost::TimeModel& model) {
  Table t;
  t.text("group").integer("group_size").text("op").integer("bytes").real("measured_s").real("predicted_s");
  t.real("ratio").text("algorithm");
  for (const auto& q : predict_points(points, model))
    t.row()(q.point->group)(q.point->group_size)(collective_name(q.point->op))(q.point->bytes)(q.point->seconds_max)(
        q.predicted_seconds)(q.ratio())(q.algorithm);
  return t;
}

std::string describe_prediction(const std::vector<SweepPoint>& points, const cost::TimeModel& model,
                                const std::string& source) {
  constexpr std::int64_t kMiB = 1 << 20;
  std::ostringstream os;
  os << "predicted with " << source << " (measured: max over ranks per call)\n";
  os << fmt::format("{:<8} {:>3} {:<15} {:>12} {:>12} {:>12} {:>7}\n", "group", "n", "op", "bytes", "measured us",
                    "predicted us", "ratio");
  std::map<std::string, double> worst;  // per op, at ≥ 1 MiB: max |ratio − 1|
  double worst_all = 0.0;
  for (const auto& q : predict_points(points, model)) {
    const SweepPoint& p = *q.point;
    os << fmt::format("{:<8} {:>3} {:<15} {:>12} {:>12.1f} {:>12.1f} {:>7.3f}\n", p.group, p.group_size,
                      collective_name(p.op), p.bytes, p.seconds_max * 1e6, q.predicted_seconds * 1e6, q.ratio());
    if (p.bytes >= kMiB && q.predicted_seconds > 0) {
      const double off = std::abs(q.ratio() - 1.0);
      worst[collective_name(p.op)] = std::max(worst[collective_name(p.op)], off);
      worst_all = std::max(worst_all, off);
    }
  }
  if (!worst.empty()) {
    os << "largest |measured/predicted - 1| at >= 1 MiB:";
    for (const auto& [op, off] : worst) os << fmt::format("  {} {:.1f}%", op, off * 100);
    os << fmt::format("  (all: {:.1f}%)\n", worst_all * 100);
  }
  return os.str();
}

}  // namespace mdtp::calibrate
