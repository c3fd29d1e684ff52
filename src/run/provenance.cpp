#include "run/provenance.hpp"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <set>
#include <vector>

#include "comm/bookkeeping_collectives.hpp"
#include "core/host_info.hpp"
#include "comm/run_clock.hpp"
#include "run/rank_stats.hpp"
#include "run/simulation_context.hpp"
#include "mdtp/build_info.hpp"
#include "spec/names.hpp"

namespace mdtp::run {
namespace {

// The unique processor names of every rank of `world`, in rank order of first appearance.
std::vector<std::string> gather_host_names(MPI_Comm world, WaitPolicy policy) {
  int size = 1;
  check_mpi(MPI_Comm_size(world, &size), "MPI_Comm_size");
  std::vector<char> mine(MPI_MAX_PROCESSOR_NAME, 0);
  int length = 0;
  check_mpi(MPI_Get_processor_name(mine.data(), &length), "MPI_Get_processor_name");
  std::vector<char> all(mine.size() * static_cast<std::size_t>(size), 0);
  bookkeeping_all_gather(mine.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), world, policy,
                         WaitLabel{group::world, "all_gather (host names)", static_cast<std::int64_t>(all.size()),
                                   nullptr});
  std::vector<std::string> names;
  for (int r = 0; r < size; ++r) {
    const char* begin = all.data() + static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME;
    std::string name(begin, strnlen(begin, MPI_MAX_PROCESSOR_NAME));
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

}  // namespace

std::string utc_time_now() {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string mpi_library_version() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string text(version, static_cast<std::size_t>(length));
  if (auto end = text.find('\n'); end != std::string::npos) text.resize(end);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\0')) text.pop_back();
  return text;
}

Attributes collect_provenance(const Mesh& mesh, MPI_Comm world, const RunDescription& run) {
  const std::vector<std::string> hosts = gather_host_names(world, mesh.wait_policy());
  std::string host_list;
  for (const auto& h : hosts) host_list += (host_list.empty() ? "" : ",") + h;
  const Topology& t = mesh.topology();
  const NodeOccupancy& occ = mesh.occupancy();
  // The most crowded node decides whether times are trustworthy, so record the maximum.
  const double oversubscription = mean_max_over_ranks(occ.oversubscription(), world, mesh.wait_policy()).max;
  Attributes a;
  a["mdtp_version"] = std::string(build_info::version);
  a["git_commit"] = std::string(build_info::git_commit);
  a["build_type"] = std::string(build_info::build_type);
  a["compiler"] = std::string(build_info::compiler);
  a["command_line"] = run.command_line;
  a["utc_time"] = utc_time_now();
  a["hosts"] = host_list;
  a["host_count"] = static_cast<std::int64_t>(hosts.size());
  a["world_size"] = static_cast<std::int64_t>(t.world());
  a["mesh_tp"] = static_cast<std::int64_t>(t.tp());
  a["mesh_pp"] = static_cast<std::int64_t>(t.pp());
  a["mesh_dp"] = static_cast<std::int64_t>(t.dp());
  a["mesh_cp"] = static_cast<std::int64_t>(t.cp());
  a["mesh_order"] = t.order();
  a["mesh_tp_mode"] = std::string(tp_mode_name(t.tp_mode()));
  a["mesh_tp_depth"] = static_cast<std::int64_t>(t.config().tp_depth);
  a["mesh_ranks_per_node"] = static_cast<std::int64_t>(t.ranks_per_node());
  a["mode"] = run.mode;
  a["dtype"] = run.dtype;
  a["backend"] = run.backend;
  a["mpi_library"] = mpi_library_version();
  a["wait_policy"] = std::string(wait_policy_name(mesh.wait_policy()));
  a["local_ranks"] = static_cast<std::int64_t>(occ.local_ranks);
  a["cores"] = static_cast<std::int64_t>(occ.cores);
  a["oversubscription"] = oversubscription;
  a["oversubscribed"] = static_cast<std::int64_t>(oversubscription > 1.0 ? 1 : 0);
  // The host compute (CPU, vector extensions, BLAS and its threads, vector math) as the writing
  // rank sees it: measured times mean little without it.
  for (const auto& [key, value] : host_info().attributes()) a[key] = value;
  // A run of the SMPI build: its times are SimGrid's, on the platform named here.
  if (simulated_build()) {
    a["provenance"] = std::string("simulated");
    a["collective_watchdog"] = std::string("off (SMPI build)");
    if (const auto sim = simulation_from_environment()) {
      a["simulated_cluster"] = sim->cluster;
      a["simulated_cluster_file"] = sim->cluster_path;
      a["simulation_platform"] = sim->platform_path;
      a["simgrid_version"] = sim->simgrid_version;
      std::string settings;
      for (const auto& s : sim->settings) {
        if (!settings.empty()) settings += ' ';
        settings += "--cfg=" + s;
      }
      a["simulation_settings"] = settings;
      // Synthetic: the tensors held no values (kernels charged, not run; no loss, no value checks).
      a["simulation_values"] = std::string(sim->real_values ? "real" : "synthetic");
    }
  } else {
    a["provenance"] = std::string("measured");
  }
  return a;
}

}  // namespace mdtp::run
