#pragma once
// Mesh: a Topology made live on MPI.  It creates one Communicator per group containing this rank,
// once, and owns them; layers take the communicators they need from it by name
// (mesh.comm("tp.row")), never global ranks.
//
// Every rank validates the whole configuration (Topology, and the MPI world size) before the
// first collective, so a bad mesh fails on every rank with the same message instead of hanging.
// Communicators are then created (MPI_Comm_create_group, collective over each new group only) in
// the fixed order of Topology::group_names() ("world", the eight tokens, "embedding", the TP
// sub-groups), identical on all ranks; a rank outside every group of a name (only "embedding"
// can leave ranks out) gets no communicator for it.  A communicator's group ranks follow the
// topology's member order, so comm(name).rank() is the rank's position in its group.
#include <mpi.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/mpi_communicator.hpp"
#include "mesh/topology.hpp"

namespace mdtp {

// Builds the Communicator of one group from its MPI communicator (which it takes ownership of).
using CommFactory = std::function<std::unique_ptr<Communicator>(const std::string& name, MPI_Comm group_comm,
                                                                CommLedger* ledger)>;

class Mesh {
 public:
  // An empty factory makes MPI communicators whose waits follow
  // resolve_wait_policy(measure_node_occupancy(world)).
  Mesh(const MeshConfig& config, MPI_Comm world, CommLedger& ledger, CommFactory factory = {});
  ~Mesh();
  Mesh(const Mesh&) = delete;
  Mesh& operator=(const Mesh&) = delete;

  const Topology& topology() const { return topology_; }
  int rank() const { return rank_; }  // in `world`
  int world_size() const { return topology_.world(); }

  // The communicator of this rank's group of that name; an mdtp::Error naming an unknown name
  // (or one this rank has no group of) and listing the known ones.
  Communicator& comm(const std::string& name) const;
  bool has_comm(const std::string& name) const;
  std::vector<std::string> comm_names() const;  // in creation order

  WaitPolicy wait_policy() const { return policy_; }
  const NodeOccupancy& occupancy() const { return occupancy_; }
  CommLedger& ledger() const { return *ledger_; }

 private:
  Topology topology_;
  int rank_ = 0;
  CommLedger* ledger_;
  NodeOccupancy occupancy_;
  WaitPolicy policy_ = WaitPolicy::library;
  std::vector<std::string> names_;
  std::map<std::string, std::unique_ptr<Communicator>> comms_;
};

}  // namespace mdtp
