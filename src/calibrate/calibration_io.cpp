#include "calibrate/calibration_io.hpp"

#include <algorithm>
#include <filesystem>
#include <limits>

#include "io/h5_file.hpp"

namespace mdtp::calibrate {
namespace {

template <class T>
const std::vector<T>& column(const Table& t, const std::string& name, const std::string& where) {
  const auto* values = std::get_if<std::vector<T>>(&t.column(name));
  require(values != nullptr, where, ": column '", name, "' has an unexpected type");
  return *values;
}

// max_bytes of an unbounded regime: INT64_MAX in memory, -1 in the file (readable as "no bound").
constexpr std::int64_t kUnboundedInFile = -1;

std::string latest_calibration_run(const std::string& path) {
  const std::string suffix = std::string("-") + kCalibrationRunKind;
  std::string latest;
  for (const auto& name : list_runs(path))  // in name order, and names start with the run number
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      latest = name;
  require(!latest.empty(), "--calibration: '", path, "' holds no calibrate run (run `mdtp calibrate --out ", path, "`)");
  return "/runs/" + latest;
}

}  // namespace

LinkParameters default_link_parameters() {
  LinkParameters p;
  p.source = "default link parameters (uncalibrated: intra-node 1 us + 20 GB/s, inter-node 5 us + 10 GB/s, "
             "GEMM 141/64 GFLOP/s f32/f64)";
  return p;
}

LinkParameters load_calibration(const std::string& spec) {
  std::string path = spec, run;
  if (auto colon = spec.find(":/runs/"); colon != std::string::npos) {
    path = spec.substr(0, colon);
    run = spec.substr(colon + 1);
  }
  require(std::filesystem::exists(path), "--calibration: no such file '", path, "'");
  {
    // Named before reading: a file that is not HDF5, a run or a table it lacks.
    const H5File file = H5File::open_read(path, "--calibration");
    if (!run.empty())
      require(file.has(run.substr(1)), "--calibration: '", path, "' has no run '", run,
              "' (omit :/runs/... for its latest calibrate run)");
  }
  if (run.empty()) run = latest_calibration_run(path);
  {
    const H5File file = H5File::open_read(path, "--calibration");
    for (const char* table : {"link_params", "collective_fits", "gemm_rates"})
      require(file.has(run.substr(1) + "/" + table), "--calibration: run '", run, "' of '", path,
              "' has no table '", table, "'; expected link_params, collective_fits and gemm_rates as `mdtp "
              "calibrate` writes them");
  }
  LinkParameters p;
  p.model.calibration = read_calibration(path, run);
  p.calibrated = true;
  const Attributes a = read_attributes(path, run);
  if (auto it = a.find("oversubscribed"); it != a.end()) {
    const auto* flag = std::get_if<std::int64_t>(&it->second);
    p.oversubscribed = flag != nullptr && *flag != 0;
  }
  p.source = path + ":" + run + (p.oversubscribed ? " (OVERSUBSCRIBED calibration)" : "");
  return p;
}

std::map<std::string, Table> calibration_tables(const CalibrationResult& r) {
  Table links;
  links.text("link").real("alpha_s").real("beta_s_per_byte").integer("points").real("rms_rel_error");
  for (const auto& [link, params] : r.calibration.links) {
    const FitQuality q = r.link_quality.count(link) ? r.link_quality.at(link) : FitQuality{};
    links.row()(link_class_name(link))(params.alpha)(params.beta)(q.points)(q.rms_relative_error);
  }
  Table fits;
  fits.text("op").text("link").integer("group_size").text("regime").integer("min_bytes").integer("max_bytes");
  fits.real("alpha_s").real("beta_s_per_byte").integer("points").real("rms_rel_error");
  for (std::size_t i = 0; i < r.calibration.fits.size(); ++i) {
    const cost::CalibrationFit& f = r.calibration.fits[i];
    const FitQuality q = i < r.fit_quality.size() ? r.fit_quality[i] : FitQuality{};
    const bool unbounded = f.max_bytes == std::numeric_limits<std::int64_t>::max();
    fits.row()(collective_name(f.op))(link_class_name(f.link))(f.group_size)(
        i < r.fit_regimes.size() ? r.fit_regimes[i] : std::string("?"))(f.min_bytes)(
        unbounded ? kUnboundedInFile : f.max_bytes)(f.alpha)(f.beta)(q.points)(q.rms_relative_error);
  }
  Table gemm;
  gemm.text("dtype").integer("m").integer("n").integer("k").real("flops_mean").real("flops_min");
  for (const auto& g : r.gemm) gemm.row()(dtype_name(g.dtype))(g.m)(g.n)(g.k)(g.flops_mean)(g.flops_min);
  return {{"link_params", links}, {"collective_fits", fits}, {"gemm_rates", gemm}};
}

cost::Calibration read_calibration(const std::string& path, const std::string& run) {
  cost::Calibration c;
  const std::string where = path + ":" + run;
  const Table links = read_table(path, run + "/link_params");
  const auto& link = column<std::string>(links, "link", where);
  const auto& la = column<double>(links, "alpha_s", where);
  const auto& lb = column<double>(links, "beta_s_per_byte", where);
  for (std::size_t i = 0; i < links.rows(); ++i) c.links[cost::parse_link_class(link[i])] = {la[i], lb[i]};
  const Table fits = read_table(path, run + "/collective_fits");
  const auto& op = column<std::string>(fits, "op", where);
  const auto& fl = column<std::string>(fits, "link", where);
  const auto& n = column<std::int64_t>(fits, "group_size", where);
  const auto& lo = column<std::int64_t>(fits, "min_bytes", where);
  const auto& hi = column<std::int64_t>(fits, "max_bytes", where);
  const auto& fa = column<double>(fits, "alpha_s", where);
  const auto& fb = column<double>(fits, "beta_s_per_byte", where);
  for (std::size_t i = 0; i < fits.rows(); ++i) {
    cost::CalibrationFit f;
    f.op = cost::parse_collective_op(op[i]);
    f.link = cost::parse_link_class(fl[i]);
    f.group_size = static_cast<int>(n[i]);
    f.min_bytes = lo[i];
    f.max_bytes = hi[i] == kUnboundedInFile ? std::numeric_limits<std::int64_t>::max() : hi[i];
    f.alpha = fa[i];
    f.beta = fb[i];
    c.fits.push_back(f);
  }
  const Table gemm = read_table(path, run + "/gemm_rates");
  const auto& dt = column<std::string>(gemm, "dtype", where);
  const auto& rate = column<double>(gemm, "flops_mean", where);
  for (std::size_t i = 0; i < gemm.rows(); ++i)
    if (rate[i] > 0) c.gemm_flops[parse_dtype(dt[i])] = rate[i];
  return c;
}

}  // namespace mdtp::calibrate
