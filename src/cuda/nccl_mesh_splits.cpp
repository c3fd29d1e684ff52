#include "cuda/nccl_mesh_splits.hpp"

#include <algorithm>

#include "comm/wait_policy.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/nccl_bootstrap.hpp"

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
#define MDTP_NCCL_HAS_SPLIT 1
#else
#define MDTP_NCCL_HAS_SPLIT 0
#endif

namespace mdtp {
namespace {

constexpr int kNoColor = -1;  // NCCL_SPLIT_NOCOLOR
constexpr int kSplitVersion = 21800;

}  // namespace

bool NcclMeshSplits::supported(MPI_Comm world) {
  int version = 0;
  if (!MDTP_NCCL_HAS_SPLIT || ncclGetVersion(&version) != ncclSuccess) version = 0;
  // The header may be newer than the library loaded at run time, and ranks may load different
  // ones: all must agree, or some would split while others bootstrap.
  int lowest = 0;
  check_mpi(MPI_Allreduce(&version, &lowest, 1, MPI_INT, MPI_MIN, world), "MPI_Allreduce(NCCL version)");
  return lowest >= kSplitVersion;
}

NcclMeshSplits::NcclMeshSplits(const CudaBackend& backend, MPI_Comm world, const Topology& topology) {
  int rank = 0, size = 0;
  check_mpi(MPI_Comm_rank(world, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(world, &size), "MPI_Comm_size");
  require(size == topology.world(), "NCCL mesh splits: the MPI world has ", size, " ranks but the mesh topology ",
          topology.world(), "; expected the mesh's own world");
  for (const std::string& name : topology.group_names()) {
    const int g = topology.group_index(name, rank);
    int key = 0;
    if (g >= 0) {
      const auto& members = topology.groups(name)[static_cast<std::size_t>(g)];
      key = static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
    }
    plan_.push_back({name, g >= 0 ? g : kNoColor, key});
  }
  parent_ = nccl_init_rank_over(world, backend.device_index(), "NCCL world communicator of the mesh");
  try {
    join_absent();
  } catch (...) {
    ncclCommDestroy(parent_);
    throw;
  }
}

NcclMeshSplits::~NcclMeshSplits() {
  if (parent_) ncclCommDestroy(parent_);
}

bool NcclMeshSplits::expects(const std::string& name) const {
  return next_ < plan_.size() && plan_[next_].name == name;
}

ncclComm_t NcclMeshSplits::split(const std::string& name) {
  require(expects(name), "NCCL mesh splits: asked for group '", name, "' where the mesh's order has ",
          next_ < plan_.size() ? "'" + plan_[next_].name + "'" : std::string("no more groups"),
          " next for this rank; the factory must serve the Mesh of the topology it was given");
  ncclComm_t made = split_next();
  try {
    join_absent();
  } catch (...) {
    ncclCommDestroy(made);
    throw;
  }
  return made;
}

void NcclMeshSplits::join_absent() {
  while (next_ < plan_.size() && plan_[next_].color == kNoColor) {
    ncclComm_t none = split_next();
    require(none == nullptr, "NCCL mesh splits: a rank outside every '", plan_[next_ - 1].name,
            "' group got a communicator from ncclCommSplit");
  }
}

ncclComm_t NcclMeshSplits::split_next() {
  const Slot& slot = plan_[next_++];
  ncclComm_t made = nullptr;
#if MDTP_NCCL_HAS_SPLIT
  MDTP_CUDA_CHECK(ncclCommSplit(parent_, slot.color == kNoColor ? NCCL_SPLIT_NOCOLOR : slot.color, slot.key, &made,
                                nullptr));
#else
  throw_error("NCCL mesh splits: this build's NCCL (", NCCL_MAJOR, ".", NCCL_MINOR,
              ") has no ncclCommSplit; expected 2.18 or newer (", slot.name, ")");
#endif
  return made;
}

}  // namespace mdtp
