#include "calibrate/calibration_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "calibrate/alpha_beta_fit.hpp"
#include "comm/bookkeeping_collectives.hpp"
#include "run/rank_stats.hpp"
#include "core/backend.hpp"
#include "spec/names.hpp"

namespace mdtp::calibrate {
namespace {

cost::CollectiveAlgorithm algorithm_of(const SweepPoint& p, const cost::AlgorithmSelection& selection) {
  const std::size_t width = static_cast<std::size_t>(p.elements > 0 ? p.bytes / p.elements : 4);
  return cost::select_algorithm(p.op, p.group_size, p.elements, width, selection);
}

// The formula's coefficients of α and β at this point (the formulas are linear in both).
FitSample formula_sample(const SweepPoint& p, const cost::AlgorithmSelection& selection) {
  const cost::CollectiveAlgorithm a = algorithm_of(p, selection);
  return {cost::algorithm_seconds(a, p.group_size, p.bytes, {1.0, 0.0}),
          cost::algorithm_seconds(a, p.group_size, p.bytes, {0.0, 1.0}), p.seconds_max};
}

}  // namespace

std::vector<GemmRate> measure_gemm_rates(std::int64_t size, const Mesh& mesh, MPI_Comm world) {
  require(size >= 16 && size <= 8192, "--gemm-size must be between 16 and 8192; got ", size);
  auto backend = make_host_backend();
  std::vector<GemmRate> rates;
  for (DType dtype : {DType::f32, DType::f64}) {
    Tensor a = backend->zeros({size, size}, dtype, MemCategory::other);
    Tensor b = backend->zeros({size, size}, dtype, MemCategory::other);
    Tensor c = backend->zeros({size, size}, dtype, MemCategory::other);
    backend->fill(a, 0.5);
    backend->fill(b, 0.25);
    backend->gemm(false, false, 1.0, a, b, 0.0, c);  // warm-up
    bookkeeping_barrier(world, mesh.wait_policy(), WaitLabel{group::world, "barrier (GEMM calibration)", -1, nullptr});
    double best = std::numeric_limits<double>::infinity();
    for (int r = 0; r < 3; ++r) {
      const auto start = std::chrono::steady_clock::now();
      backend->gemm(false, false, 1.0, a, b, 0.0, c);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    const double flops = 2.0 * static_cast<double>(size) * static_cast<double>(size) * static_cast<double>(size);
    const MeanMax rate = run::mean_max_over_ranks(flops / best, world, mesh.wait_policy());
    const MeanMax slowest = run::mean_max_over_ranks(best, world, mesh.wait_policy());
    rates.push_back({dtype, size, size, size, rate.mean, flops / slowest.max});
  }
  return rates;
}

std::vector<std::int64_t> cache_knees(int local_ranks) {
  require(local_ranks >= 1, "cache_knees needs at least one rank on the node; got ", local_ranks);
  std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index3/size");
  std::string text;
  if (!(in >> text) || text.empty()) return {};
  std::int64_t scale = 1;
  switch (text.back()) {
    case 'K': scale = 1024; break;
    case 'M': scale = 1024 * 1024; break;
    case 'G': scale = 1024 * 1024 * 1024; break;
    default: break;
  }
  if (scale > 1) text.pop_back();
  try {
    const std::int64_t l3 = std::stoll(text) * scale;
    return {l3 / (2 * static_cast<std::int64_t>(local_ranks)), l3};
  } catch (const std::exception&) {
    return {};  // an unreadable size: no knees, one rate per algorithm
  }
}

CalibrationResult fit_calibration(const std::vector<SweepPoint>& points, const std::vector<GemmRate>& gemm,
                                  const cost::AlgorithmSelection& selection, const std::vector<std::int64_t>& knees) {
  CalibrationResult r;
  r.gemm = gemm;
  for (const auto& g : gemm)
    if (g.flops_mean > 0) r.calibration.gemm_flops[g.dtype] = g.flops_mean;

  // Link parameters: every point of a link class through its algorithm's formula.
  std::map<LinkClass, std::vector<FitSample>> by_link;
  for (const auto& p : points) by_link[cost::parse_link_class(p.link)].push_back(formula_sample(p, selection));
  for (const auto& [link, samples] : by_link) {
    const AlphaBetaFit fit = fit_alpha_beta(samples);
    r.calibration.links[link] = {fit.alpha, fit.beta};
    r.link_quality[link] = {fit.points, fit.rms_relative_error};
  }

  // Per (op, link, n): points in size order (the sweep's order), cut where the algorithm changes.
  std::map<std::tuple<CollectiveOp, std::string, int>, std::vector<const SweepPoint*>> series;
  for (const auto& p : points) series[{p.op, p.link, p.group_size}].push_back(&p);
  for (auto& [key, list] : series) {
    std::sort(list.begin(), list.end(), [](const SweepPoint* a, const SweepPoint* b) { return a->bytes < b->bytes; });
    std::size_t begin = 0;
    while (begin < list.size()) {
      const cost::CollectiveAlgorithm algorithm = algorithm_of(*list[begin], selection);
      // How many knees a size is past (0: in cache).
      const auto past_knee = [&](const SweepPoint* p) {
        return std::count_if(knees.begin(), knees.end(), [&](std::int64_t k) { return k > 0 && p->bytes >= k; });
      };
      const auto from_dram = past_knee(list[begin]);
      std::size_t end = begin;
      std::vector<FitSample> samples;
      while (end < list.size() && algorithm_of(*list[end], selection) == algorithm && past_knee(list[end]) == from_dram) {
        samples.push_back({1.0, static_cast<double>(list[end]->bytes), list[end]->seconds_max});
        ++end;
      }
      const AlphaBetaFit fit = fit_alpha_beta(samples);
      cost::CalibrationFit f;
      f.op = std::get<0>(key);
      f.link = cost::parse_link_class(std::get<1>(key));
      f.group_size = std::get<2>(key);
      f.min_bytes = begin == 0 ? 0 : list[begin]->bytes;
      f.max_bytes = end == list.size() ? std::numeric_limits<std::int64_t>::max() : list[end]->bytes;
      f.alpha = fit.alpha;
      f.beta = fit.beta;
      r.calibration.fits.push_back(f);
      r.fit_quality.push_back({fit.points, fit.rms_relative_error});
      static const char* const kCacheRegime[] = {"", " (past cache knee)", " (past L3)"};
      r.fit_regimes.push_back(std::string(cost::algorithm_name(algorithm)) + kCacheRegime[std::min<std::ptrdiff_t>(from_dram, 2)]);
      begin = end;
    }
  }
  return r;
}

std::map<std::string, Table> calibrate_run_tables(const std::vector<SweepPoint>& points, const CalibrationResult& r,
                                                  const cost::AlgorithmSelection& selection) {
  Table sweep;
  sweep.text("group").integer("group_size").text("link").text("op").text("algorithm").integer("bytes");
  sweep.integer("elements").integer("iterations").real("time_mean_s").real("time_max_s").real("algbw_GBps");
  sweep.real("busbw_GBps").integer("correct").real("model_s").real("formula_s");
  for (const auto& p : points) {
    const LinkClass link = cost::parse_link_class(p.link);
    const cost::CalibrationFit* fit = r.calibration.find(p.op, link, p.group_size, p.bytes);
    const FitSample f = formula_sample(p, selection);
    const cost::LinkParams lp = r.calibration.links.count(link) ? r.calibration.links.at(link) : cost::LinkParams{};
    sweep.row()(p.group)(p.group_size)(p.link)(collective_name(p.op))(cost::algorithm_name(algorithm_of(p, selection)))(
        p.bytes)(p.elements)(p.iterations)(p.seconds_mean)(p.seconds_max)(p.algbw / 1e9)(p.busbw / 1e9)(
        p.correct ? 1 : 0)(fit ? fit->seconds(p.bytes) : 0.0)(f.alpha_coefficient * lp.alpha + f.beta_coefficient * lp.beta);
  }
  std::map<std::string, Table> tables = calibration_tables(r);
  tables.emplace("sweep", std::move(sweep));
  return tables;
}

std::string describe_fit(const CalibrationResult& r) {
  std::ostringstream os;
  os << "link parameters (through the algorithm formulas):\n";
  for (const auto& [link, p] : r.calibration.links) {
    const FitQuality q = r.link_quality.count(link) ? r.link_quality.at(link) : FitQuality{};
    os << fmt::format("  {:<10} alpha {:>8.2f} us   beta {:>9.4f} ns/B ({:>7.2f} GB/s)   {:>3} points, rms rel. error {:.2f}\n",
                      link_class_name(link), p.alpha * 1e6, p.beta * 1e9, p.beta > 0 ? 1e-9 / p.beta : 0.0, q.points,
                      q.rms_relative_error);
  }
  os << "per-op fits t = alpha + beta*S:\n";
  for (std::size_t i = 0; i < r.calibration.fits.size(); ++i) {
    const auto& f = r.calibration.fits[i];
    const FitQuality q = r.fit_quality[i];
    const std::string hi = f.max_bytes == std::numeric_limits<std::int64_t>::max() ? "inf" : std::to_string(f.max_bytes);
    os << fmt::format("  {:<15} n={:<3} {:<28} [{}, {}) B  alpha {:>8.2f} us  beta {:>9.4f} ns/B  rms {:.2f} ({} pts)\n",
                      collective_name(f.op), f.group_size, r.fit_regimes[i], f.min_bytes, hi, f.alpha * 1e6, f.beta * 1e9,
                      q.rms_relative_error, q.points);
  }
  for (const auto& g : r.gemm)
    os << fmt::format("GEMM {} {}^3: {:.1f} GFLOP/s per rank (mean over ranks, all at once; slowest {:.1f})\n",
                      dtype_name(g.dtype), g.m, g.flops_mean / 1e9, g.flops_min / 1e9);
  return os.str();
}

}  // namespace mdtp::calibrate
