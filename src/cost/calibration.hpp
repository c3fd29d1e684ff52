#pragma once
// Calibration: what `mdtp calibrate` measures and the time model then trusts over its formulas.
//
//  - links: point-to-point α (s) and β (s/byte) per link class, fed to the algorithm formulas
//    of time_model.hpp for every op that has no fit of its own;
//  - fits: per (op, link class, group size, size regime), t = alpha + beta · S with S the
//    call's LOGICAL bytes as the ledger counts them (comm/ledger.hpp: the full gathered buffer for
//    all-gather/reduce-scatter, the buffer for the others).  Such a fit absorbs whichever
//    algorithm the library picked in that regime, so a call it covers is charged the fit directly;
//  - gemm_flops: the measured GEMM rate per dtype.
//
// Stored in HDF5 by calibration_io.hpp (tables "link_params", "collective_fits", "gemm_rates" of
// a /runs/NNNN-calibrate group).  A plain value type: no global state, copied into a TimeModel.
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "comm/ledger.hpp"
#include "mesh/topology.hpp"

namespace mdtp::cost {

// α in seconds per message, β in seconds per byte.
struct LinkParams {
  double alpha = 0.0;
  double beta = 0.0;
};

struct CalibrationFit {
  CollectiveOp op = CollectiveOp::all_reduce;
  LinkClass link = LinkClass::intra_node;
  int group_size = 0;  // ranks in the group it was measured on; 0 = any size
  std::int64_t min_bytes = 0;  // the size regime [min_bytes, max_bytes) of logical bytes
  std::int64_t max_bytes = std::numeric_limits<std::int64_t>::max();
  double alpha = 0.0;  // s
  double beta = 0.0;   // s per logical byte
  double seconds(std::int64_t logical_bytes) const { return alpha + beta * static_cast<double>(logical_bytes); }
};

struct Calibration {
  std::map<LinkClass, LinkParams> links;
  std::vector<CalibrationFit> fits;
  std::map<DType, double> gemm_flops;  // flop/s

  // The fit covering a call: same op and link class, `bytes` inside its regime, and measured on
  // `group_size` ranks — or, when no fit has that size, one marked "any size" (0).  nullptr if none.
  const CalibrationFit* find(CollectiveOp op, LinkClass link, int group_size, std::int64_t bytes) const;
  bool empty() const { return links.empty() && fits.empty() && gemm_flops.empty(); }
};

// "all_reduce" … (collective_name's spelling) back to the op; mdtp::Error for anything else.
CollectiveOp parse_collective_op(const std::string& name);
// "intra-node" | "inter-node" (link_class_name's spelling) back to the class.
LinkClass parse_link_class(const std::string& name);

}  // namespace mdtp::cost
