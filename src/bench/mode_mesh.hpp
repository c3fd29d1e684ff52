#pragma once
// Which mesh a tensor-parallel mode runs on when a driver is given only the world size — the
// rule `mdtp bench --modes ...` documents:
//   none      tp = 1, dp = world (pure data parallelism: the baseline)
//   1d, 1d-sp tp = world
//   2d        tp = q², the largest square ≤ world dividing it (q ≥ 2), dp = world / tp
//   2.5d      tp = d·q² (q ≥ 2); with the depth given, the largest such q; otherwise the largest
//             tp dividing world, ties going to the layout with real depth (d ≥ 2) and then the
//             larger q; dp = world / tp
//   3d        tp = q³, the largest cube ≤ world dividing it (q ≥ 2), dp = world / tp
// The remaining ranks form the data-parallel axis, whose gradient all-reduce is part of the step.
#include <optional>
#include <string>
#include <vector>

#include "mesh/topology.hpp"

namespace mdtp::bench {

// The mesh of `mode` on `world` ranks, or nullopt when the mode cannot use them (e.g. 3d on 4).
// `depth` > 0 fixes the 2.5D depth.  An unknown mode is an mdtp::Error.
std::optional<MeshConfig> mesh_for_mode(TpMode mode, int world, int depth = 0);

// The TP modes (1d, 1d-sp, 2d, 2.5d, 3d) that fit `world`, in that order ("all").
std::vector<TpMode> modes_that_fit(int world, int depth = 0);

// Rows of an activation (per data-parallel replica) and hidden sizes must be multiples of these
// for the mode's shards to divide evenly.
std::int64_t row_unit(TpMode mode, const MeshConfig& mesh);
std::int64_t feature_unit(TpMode mode, const MeshConfig& mesh);

// "1d tp=8", "2d tp=4 (q=2) dp=2", ...
std::string describe_mesh(TpMode mode, const MeshConfig& mesh);

}  // namespace mdtp::bench
