#include "cost/measured_tables.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.hpp"
#include "cost/megatron_h100.hpp"
#include "cost/narayanan.hpp"

namespace mdtp::cost {

const std::vector<MeasuredTable>& measured_tables() {
  static const std::vector<MeasuredTable> tables = {narayanan_measured_table(), megatron_h100_measured_table()};
  return tables;
}

const MeasuredTable& measured_table(const std::string& key) {
  std::string keys;
  for (const MeasuredTable& t : measured_tables()) {
    if (t.key == key) return t;
    keys += (keys.empty() ? "" : ", ") + t.key;
  }
  throw_error("no measured table '", key, "'; expected one of ", keys);
}

namespace {

// Ranks 1..n, ties given the mean of the ranks they span.
std::vector<double> ranks(const std::vector<double>& x) {
  std::vector<std::size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t i, std::size_t j) { return x[i] < x[j]; });
  std::vector<double> r(x.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    for (std::size_t k = i; k <= j; ++k) r[order[k]] = (static_cast<double>(i + j) / 2.0) + 1.0;
    i = j + 1;
  }
  return r;
}

}  // namespace

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  require(a.size() == b.size(), "spearman: series of ", a.size(), " and ", b.size(), " values");
  if (a.size() < 2) return 0.0;
  // Pearson's correlation of the ranks (exact with ties, unlike 1 − 6Σd²/(n(n²−1))).
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size()), mean = (n + 1.0) / 2.0;
  double sab = 0.0, saa = 0.0, sbb = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    sab += (ra[i] - mean) * (rb[i] - mean);
    saa += (ra[i] - mean) * (ra[i] - mean);
    sbb += (rb[i] - mean) * (rb[i] - mean);
  }
  return saa == 0.0 || sbb == 0.0 ? 0.0 : sab / std::sqrt(saa * sbb);
}

StepConfig measured_run_config(const MeasuredRun& row, TpMode mode, std::int64_t seq, std::int64_t vocab) {
  StepConfig c;
  c.spec.model = ModelShape{row.layers, row.hidden, row.heads, seq, vocab};
  c.spec.global_batch = row.batch;
  c.spec.layout.mode = mode;
  c.spec.layout.tp = row.tp;
  c.spec.layout.pp = row.pp;
  c.spec.layout.dp = row.gpus / (row.tp * row.pp);
  c.set_micro_batch(1);
  c.spec.layout.schedule = ScheduleKind::one_f_one_b;
  c.spec.layout.chunks = 1;
  const int per_stage = row.layers / row.pp;
  if (row.pp > 1)
    for (int v = 2; v <= per_stage; ++v)
      if (per_stage % v == 0) {
        c.spec.layout.schedule = ScheduleKind::interleaved;
        c.spec.layout.chunks = v;
        break;
      }
  return c;
}

PairOrder distinct_pair_order(const std::vector<double>& measured, const std::vector<double>& predicted,
                              double apart) {
  require(measured.size() == predicted.size(), "pair order: series of ", measured.size(), " and ", predicted.size(),
          " values");
  PairOrder o;
  for (std::size_t i = 0; i < measured.size(); ++i)
    for (std::size_t j = 0; j < measured.size(); ++j) {
      if (measured[i] <= measured[j] * (1.0 + apart)) continue;  // i not more than `apart` above j
      ++o.pairs;
      if (predicted[i] > predicted[j]) ++o.ordered;
    }
  return o;
}

Validation validate(const MeasuredTable& table, const Cluster& cluster) {
  Validation v;
  v.table = &table;
  double lo = table.rows.front().tflops_per_gpu, hi = lo;
  for (const auto& r : table.rows) {
    lo = std::min(lo, r.tflops_per_gpu);
    hi = std::max(hi, r.tflops_per_gpu);
  }
  // The constant c minimising max |c/x − 1| over the measured x: c/lo − 1 = 1 − c/hi.
  v.baseline_tflops = 2.0 / (1.0 / lo + 1.0 / hi);
  const double n = static_cast<double>(table.rows.size());
  std::vector<double> measured, predicted;
  for (const auto& r : table.rows) {
    ValidationRow row;
    row.row = r;
    const StepConfig config = table.config(r);
    row.estimate = estimate_step(config, cluster);
    row.predicted = table.flops(config) / (row.estimate.step_seconds * config.gpus()) / 1e12;
    row.error = (row.predicted - r.tflops_per_gpu) / r.tflops_per_gpu;
    row.baseline_error = (v.baseline_tflops - r.tflops_per_gpu) / r.tflops_per_gpu;
    v.max_error = std::max(v.max_error, std::abs(row.error));
    v.baseline_max_error = std::max(v.baseline_max_error, std::abs(row.baseline_error));
    v.mean_abs_error += std::abs(row.error) / n;
    v.baseline_mean_abs_error += std::abs(row.baseline_error) / n;
    measured.push_back(r.tflops_per_gpu);
    predicted.push_back(row.predicted);
    v.rows.push_back(row);
  }
  v.spearman = spearman(predicted, measured);
  const PairOrder order = distinct_pair_order(measured, predicted);
  v.distinct_pairs = order.pairs;
  v.distinct_pairs_ordered = order.ordered;
  return v;
}

}  // namespace mdtp::cost
