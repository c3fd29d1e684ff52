#pragma once
// The two things a block of replicated columns (Parameter::replicated_columns) needs beyond an
// ordinary parameter: its copies' partial gradients summed over their group, and the squares a
// global norm counts once.  Both work on a gradient as ZeRO holds it too (a flat buffer), so the
// plain and the sharded optimizers share them.
#include <cstdint>

#include "core/backend.hpp"
#include "tp/parameter.hpp"

namespace mdtp {

class Mesh;

// Adds the columns [rc.first, rc.first + rc.count) of `grad` (the parameter's shard, any shape of
// rows × `cols` elements) over rc.group: one all-reduce of a packed [rows, count] copy.  Nothing
// when the group has one rank.
void sum_replicated_columns(Tensor grad, std::int64_t cols, const ReplicatedColumns& rc, const Mesh& mesh,
                            const Backend& backend);

// The squares a global norm must leave out on this rank: those of the replicated columns among the
// elements [first, first + n) of the shard (row-major, `cols` per row), which `segment` holds, on
// every rank of rc.group but its first (which counts them for the group); 0 on the first.
double uncounted_squares(const Tensor& segment, std::int64_t first, std::int64_t cols, const ReplicatedColumns& rc,
                         const Mesh& mesh, const Backend& backend);

}  // namespace mdtp
