#pragma once
// Calibration ⇄ HDF5, as tables of a results file (io/results_file.hpp):
//
//   /runs/NNNN-calibrate/link_params      link (text: intra-node|inter-node), alpha_s, beta_s_per_byte
//   /runs/NNNN-calibrate/collective_fits  op (text: all_reduce, …), link, group_size (0 = any size),
//                                         min_bytes, max_bytes (-1 = unbounded), alpha_s,
//                                         beta_s_per_byte        — t = alpha_s + beta_s_per_byte · S,
//                                         S the call's logical bytes
//   /runs/NNNN-calibrate/gemm_rates       dtype (text: f32|f64|…), flops_per_s
//
// All three tables are written (possibly with no rows).  `mdtp calibrate` writes them with
//   ResultsFile(path).append_run(kCalibrationRunKind, attributes, calibration_tables(c));
// `mdtp cost --calibration FILE` reads the newest such run with load_calibration(FILE).
//
// Header-only on purpose: mdtp_cost does not link mdtp_io (src/CMakeLists.txt keeps the cost model
// free of HDF5), so only targets that link both (the `mdtp` program, tests) include this file.
#include <filesystem>
#include <map>
#include <string>

#include "cost/calibration.hpp"
#include "core/error.hpp"
#include "io/results_file.hpp"
#include "io/table.hpp"

namespace mdtp::cost {

inline constexpr const char* kCalibrationRunKind = "calibrate";

inline std::map<std::string, Table> calibration_tables(const Calibration& c) {
  Table links;
  links.text("link").real("alpha_s").real("beta_s_per_byte");
  for (const auto& [link, p] : c.links) links.row()(link_class_name(link))(p.alpha)(p.beta);
  Table fits;
  fits.text("op").text("link").integer("group_size").integer("min_bytes").integer("max_bytes").real("alpha_s").real(
      "beta_s_per_byte");
  for (const auto& f : c.fits) {
    const bool unbounded = f.max_bytes == std::numeric_limits<std::int64_t>::max();
    fits.row()(collective_name(f.op))(link_class_name(f.link))(f.group_size)(f.min_bytes)(
        unbounded ? std::int64_t{-1} : f.max_bytes)(f.alpha)(f.beta);
  }
  Table gemm;
  gemm.text("dtype").real("flops_per_s");
  for (const auto& [dtype, rate] : c.gemm_flops) gemm.row()(dtype_name(dtype))(rate);
  return {{"link_params", links}, {"collective_fits", fits}, {"gemm_rates", gemm}};
}

namespace detail {
template <class T>
const std::vector<T>& calibration_column(const Table& t, const std::string& name, const std::string& where) {
  const auto* values = std::get_if<std::vector<T>>(&t.column(name));
  require(values != nullptr, where, ": column '", name, "' has an unexpected type");
  return *values;
}
}  // namespace detail

inline Calibration calibration_from_tables(const Table& links, const Table& fits, const Table& gemm,
                                           const std::string& where) {
  using detail::calibration_column;
  Calibration c;
  {
    const auto& link = calibration_column<std::string>(links, "link", where + "/link_params");
    const auto& a = calibration_column<double>(links, "alpha_s", where + "/link_params");
    const auto& b = calibration_column<double>(links, "beta_s_per_byte", where + "/link_params");
    for (std::size_t i = 0; i < link.size(); ++i) c.links[parse_link_class(link[i])] = LinkParams{a[i], b[i]};
  }
  {
    const std::string w = where + "/collective_fits";
    const auto& op = calibration_column<std::string>(fits, "op", w);
    const auto& link = calibration_column<std::string>(fits, "link", w);
    const auto& n = calibration_column<std::int64_t>(fits, "group_size", w);
    const auto& lo = calibration_column<std::int64_t>(fits, "min_bytes", w);
    const auto& hi = calibration_column<std::int64_t>(fits, "max_bytes", w);
    const auto& a = calibration_column<double>(fits, "alpha_s", w);
    const auto& b = calibration_column<double>(fits, "beta_s_per_byte", w);
    for (std::size_t i = 0; i < op.size(); ++i) {
      CalibrationFit f;
      f.op = parse_collective_op(op[i]);
      f.link = parse_link_class(link[i]);
      f.group_size = static_cast<int>(n[i]);
      f.min_bytes = lo[i];
      f.max_bytes = hi[i] < 0 ? std::numeric_limits<std::int64_t>::max() : hi[i];
      f.alpha = a[i];
      f.beta = b[i];
      c.fits.push_back(f);
    }
  }
  {
    const auto& dtype = calibration_column<std::string>(gemm, "dtype", where + "/gemm_rates");
    const auto& rate = calibration_column<double>(gemm, "flops_per_s", where + "/gemm_rates");
    for (std::size_t i = 0; i < dtype.size(); ++i) c.gemm_flops[parse_dtype(dtype[i])] = rate[i];
  }
  return c;
}

// The calibration of run `run` (e.g. "0003-calibrate"), or of the newest "-calibrate" run.
inline Calibration load_calibration(const std::string& path, std::string run = "") {
  require(std::filesystem::exists(path), "calibration file '", path, "' does not exist; run `mdtp calibrate` first");
  if (run.empty()) {
    const std::string suffix = std::string("-") + kCalibrationRunKind;
    for (const auto& name : list_runs(path))
      if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
        run = name;  // list_runs is in name order, and names start with the run number
    require(!run.empty(), "no calibration run (/runs/NNNN-", kCalibrationRunKind, ") in ", path,
            "; run `mdtp calibrate` first");
  }
  const std::string group = "/runs/" + run;
  return calibration_from_tables(read_table(path, group + "/link_params"), read_table(path, group + "/collective_fits"),
                                 read_table(path, group + "/gemm_rates"), path + ":" + group);
}

}  // namespace mdtp::cost
