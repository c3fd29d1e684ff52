#pragma once
// A mesh's NCCL communicators split from one NCCL communicator over the whole world
// (ncclCommSplit, NCCL >= 2.18), in the mesh's group order.  A split needs no unique-id bootstrap
// of its own: each group reuses the parent's bootstrap and topology detection, so creating the
// ~15 groups of a mesh costs one world-wide initialisation plus cheap splits.
//
// ncclCommSplit is collective over the whole parent: every rank must take part in every split, in
// the same order, the ranks outside a group with NCCL_SPLIT_NOCOLOR.  The Mesh asks its factory
// only for the groups a rank belongs to (pp >= 3 leaves the middle stages out of "embedding"), so
// this object is given the mesh's Topology and follows Topology::group_names(), the order the Mesh
// creates communicators in: it joins the splits of the names this rank has no group of right
// after the split before them (and, for leading ones, at creation), so that a rank never waits in
// a group's MPI_Comm_create_group while another waits for it in a split.
//
// Resources are not shared with the parent (ncclConfig_t::splitShare stays NCCL's default, off
// unless NCCL_COMM_SPLIT_SHARE_RESOURCES=1): groups here run concurrently on their own streams,
// and communicators sharing resources serialise their operations.
#include <mpi.h>
#include <nccl.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "cuda/cuda_backend.hpp"
#include "mesh/topology.hpp"

namespace mdtp {

class NcclMeshSplits {
 public:
  // Whether this build and every rank's NCCL library can split (>= 2.18); collective over `world`.
  static bool supported(MPI_Comm world);

  // Collective over `world`, which must be the mesh's world (topology.world() ranks, rank order):
  // creates the parent (ncclCommInitRank with an id broadcast over `world`) and joins the splits
  // of the leading names this rank has no group of.
  NcclMeshSplits(const CudaBackend& backend, MPI_Comm world, const Topology& topology);
  ~NcclMeshSplits();
  NcclMeshSplits(const NcclMeshSplits&) = delete;
  NcclMeshSplits& operator=(const NcclMeshSplits&) = delete;

  // Whether `name` is the next group of this rank in the mesh's order (the Mesh's next request).
  bool expects(const std::string& name) const;
  // Collective over the world: splits the parent for the next group (which must be `name`), then
  // joins the splits of the names after it that this rank has no group of.  The new communicator's
  // ranks follow the topology's member order (NCCL rank = group rank); the caller owns it.
  ncclComm_t split(const std::string& name);

 private:
  struct Slot {
    std::string name;
    int color;  // the group's index among the name's groups; NCCL_SPLIT_NOCOLOR when none
    int key;    // this rank's position in that group
  };
  void join_absent();  // the NCCL_SPLIT_NOCOLOR splits from next_ up to this rank's next group
  ncclComm_t split_next();

  std::vector<Slot> plan_;
  std::size_t next_ = 0;
  ncclComm_t parent_ = nullptr;
};

}  // namespace mdtp
