#include "mesh/mesh.hpp"

#include <algorithm>
#include <sstream>

#include "core/error.hpp"

namespace mdtp {

Mesh::Mesh(const MeshConfig& config, MPI_Comm world, CommLedger& ledger, CommFactory factory)
    : topology_(config), ledger_(&ledger) {
  // Local checks only up to here: a rank that throws has issued no collective, and every rank
  // evaluates the same configuration, so all ranks throw together.
  int size = 0;
  MPI_Comm_rank(world, &rank_);
  MPI_Comm_size(world, &size);
  require(size == topology_.world(), "the mesh is configured for world=", topology_.world(),
          " ranks but the MPI world has ", size, " ranks (check mpiexec -n)");

  occupancy_ = measure_node_occupancy(world);
  policy_ = resolve_wait_policy(occupancy_);
  if (!factory) {
    WaitPolicy policy = policy_;
    factory = [policy](const std::string& name, MPI_Comm comm, CommLedger* l) {
      return make_mpi_communicator(name, comm, l, policy);
    };
  }

  // MPI_Comm_create_group is collective over the new group only, so small groups are made
  // without synchronising the whole world each time; on an oversubscribed node (where blocked
  // ranks spin) that is several times faster than MPI_Comm_split over `world`.  The tag is the
  // name's index, so each call is matched only by the same name's call on the other members.
  struct GroupHandle {  // freed on every path, including a factory that throws
    MPI_Group group = MPI_GROUP_NULL;
    ~GroupHandle() {
      if (group != MPI_GROUP_NULL) MPI_Group_free(&group);
    }
  } world_group;
  check_mpi(MPI_Comm_group(world, &world_group.group), "MPI_Comm_group");
  const auto names = topology_.group_names();
  for (std::size_t n = 0; n < names.size(); ++n) {
    const std::string& name = names[n];
    const int g = topology_.group_index(name, rank_);
    if (g < 0) continue;  // only "embedding" leaves ranks out
    const auto& members = topology_.groups(name)[g];
    GroupHandle group;
    check_mpi(MPI_Group_incl(world_group.group, static_cast<int>(members.size()), members.data(), &group.group),
              "MPI_Group_incl");
    MPI_Comm sub = MPI_COMM_NULL;
    check_mpi(MPI_Comm_create_group(world, group.group, static_cast<int>(n), &sub), "MPI_Comm_create_group");
    auto comm = factory(name, sub, ledger_);
    require(comm != nullptr, "the communicator factory returned nothing for mesh group '", name, "'");
    const int position = static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
    require(comm->rank() == position && comm->size() == static_cast<int>(members.size()), "communicator '", name,
            "' has rank ", comm->rank(), " of ", comm->size(), " but the topology expects rank ", position, " of ",
            members.size());
    names_.push_back(name);
    comms_.emplace(name, std::move(comm));
  }
}

Mesh::~Mesh() = default;

Communicator& Mesh::comm(const std::string& name) const {
  auto it = comms_.find(name);
  if (it != comms_.end()) return *it->second;
  std::ostringstream known;
  for (const auto& n : names_) known << ' ' << n;
  auto all = topology_.group_names();
  if (std::find(all.begin(), all.end(), name) != all.end())
    throw_error("rank ", rank_, " belongs to no '", name, "' group, so it has no such communicator; its communicators:",
                known.str());
  throw_error("unknown mesh communicator '", name, "'; known communicators:", known.str());
}

bool Mesh::has_comm(const std::string& name) const { return comms_.count(name) != 0; }

std::vector<std::string> Mesh::comm_names() const { return names_; }

}  // namespace mdtp
