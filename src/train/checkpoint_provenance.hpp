#pragma once
// What a checkpoint's root carries besides the model (docs/failures.md): the code that wrote it
// (mdtp_version, git_commit) and the mesh it came from (mesh_world, mesh_tp, mesh_pp, mesh_dp,
// mesh_cp, mesh_tp_mode, mesh_tp_depth, mesh_order), so a checkpoint found on disk can be traced
// and a resume on another mesh is a deliberate choice (loading accepts any mesh: sharding never
// shows in the file).  No time stamp: two identical runs write identical attributes.
#include <string>

#include "io/h5_file.hpp"
#include "mesh/topology.hpp"

namespace mdtp {

void write_checkpoint_provenance(H5File& file, const Topology& topology);

// "mdtp 0.4.0 (git abc1234), mesh world=8 tp=4 pp=1 dp=2 cp=1 mode=2d depth=1 order=tp-cp-dp-pp",
// or "" when the file carries none (written before provenance was stored).
std::string describe_checkpoint_provenance(const H5File& file);

}  // namespace mdtp
