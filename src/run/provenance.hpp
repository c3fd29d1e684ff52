#pragma once
// Provenance: the attributes every run in a results file carries, so that a number can always be
// traced to the code, the machine and the configuration that produced it (docs/architecture.md, "File formats").
// Written as attributes of /runs/<NNNN>-<kind>:
//   mdtp_version, git_commit, build_type, compiler, command_line, utc_time, hosts (unique,
//   comma-separated), host_count, world_size, mesh_tp/pp/dp/cp, mesh_order, mesh_tp_mode,
//   mesh_tp_depth, mesh_ranks_per_node, mode, dtype, backend, mpi_library, wait_policy,
//   local_ranks, cores (of rank 0's node), oversubscription (local ranks / cores, the maximum
//   over nodes), oversubscribed (0/1), and the host_* attributes of core/host_info.hpp.
#include <mpi.h>

#include <string>

#include "io/results_file.hpp"
#include "mesh/mesh.hpp"

namespace mdtp::run {

struct RunDescription {
  std::string command_line;  // as typed, without the program name
  std::string mode;          // tensor-parallel mode, or "" (calibrate)
  std::string dtype;
  std::string backend;       // Backend::name()
};

// Collective over the mesh's world (the host names of all ranks are gathered); every rank gets
// the same attributes.
Attributes collect_provenance(const Mesh& mesh, MPI_Comm world, const RunDescription& run);

// "2024-05-01T12:34:56Z".
std::string utc_time_now();
// MPI_Get_library_version, first line only (MPICH prints a multi-line configuration).
std::string mpi_library_version();

}  // namespace mdtp::run
