#pragma once
// Choosing this rank's GPU and the communicators that carry device tensors.
//
//  - select_device_for_local_rank: rank i of a node takes visible GPU i mod (visible GPUs).
//    With one GPU per task (Slurm --gpus-per-task=1, or CUDA_VISIBLE_DEVICES set per rank) each
//    rank sees one GPU and takes it.
//  - make_nccl_comm_factory: NCCL communicators, each created (collectively) when the factory
//    makes it; refuses (on every rank) when ranks of a node share a physical GPU, which NCCL does
//    not support.
//  - make_staged_mpi_comm_factory: MPI through host staging (staged_mpi_communicator.hpp); any
//    number of ranks per GPU.
//  - make_device_comm_factory: one of the two, by MDTP_COMM=nccl|mpi (default nccl).
// The factories have the signature of Mesh's CommFactory (mesh/mesh.hpp).
#include <mpi.h>

#include <functional>
#include <memory>
#include <string>

#include "comm/communicator.hpp"
#include "comm/wait_policy.hpp"
#include "cuda/cuda_backend.hpp"
#include "mesh/topology.hpp"

namespace mdtp {

struct DeviceAssignment {
  int local_rank = 0;       // this rank's index among the ranks of its node
  int local_ranks = 1;      // ranks of `world` on this node
  int visible_devices = 0;  // GPUs this process can see
  int device = 0;           // the one it took (now the current device)
};

// Collective over `world`.  Sets the current device.  Throws on every rank (the same message)
// when any rank sees no GPU.
DeviceAssignment select_device_for_local_rank(MPI_Comm world);

// Number of ranks on this node and of distinct physical GPUs (by UUID) their current devices
// are; collective over `world`.
struct GpuSharing {
  int local_ranks = 1;
  int distinct_gpus = 1;
};
GpuSharing measure_gpu_sharing(MPI_Comm world);

using DeviceCommFactory =
    std::function<std::unique_ptr<Communicator>(const std::string& name, MPI_Comm group_comm, CommLedger* ledger)>;

// Collective over `world`.  Every communicator is created when the factory makes it, collectively
// (so a Mesh, which asks for its groups in one order on all ranks, creates them all up front and
// nothing is created mid-run).  With `mesh`, the topology of the Mesh the factory is for (`world`
// being that mesh's world), and NCCL >= 2.18 on every rank, the groups are split from one NCCL
// communicator over `world` (nccl_mesh_splits.hpp), made here; otherwise each group bootstraps its
// own (ncclCommInitRank with an id broadcast over the group's MPI communicator).  With `mesh` the
// factory serves that Mesh only, in its order.  `backend` must outlive every communicator made;
// `mesh` is read here only.
DeviceCommFactory make_nccl_comm_factory(const CudaBackend& backend, MPI_Comm world, const Topology* mesh = nullptr);

// Not collective.  Host staging is accounted by `host_staging` (a fresh HostAllocator if null).
DeviceCommFactory make_staged_mpi_comm_factory(const CudaBackend& backend, WaitPolicy policy,
                                               std::shared_ptr<Allocator> host_staging = nullptr);

enum class DeviceCommKind : std::uint8_t { nccl, mpi };
const char* device_comm_kind_name(DeviceCommKind kind);
// Reads MDTP_COMM (nccl|mpi; unset or empty: nccl); an unknown value is an mdtp::Error naming it.
DeviceCommKind resolve_device_comm_kind();

// Collective over `world`.  `mesh`: see make_nccl_comm_factory (the staged factory needs none).
DeviceCommFactory make_device_comm_factory(const CudaBackend& backend, MPI_Comm world, DeviceCommKind kind,
                                           WaitPolicy policy, std::shared_ptr<Allocator> host_staging = nullptr,
                                           const Topology* mesh = nullptr);

}  // namespace mdtp
