#include "cuda/device_comm.hpp"

#include <cstdlib>
#include <cstring>
#include <set>
#include <string_view>
#include <vector>

#include "cuda/cuda_check.hpp"
#include "cuda/nccl_communicator.hpp"
#include "cuda/nccl_mesh_splits.hpp"
#include "cuda/staged_mpi_communicator.hpp"

namespace mdtp {
namespace {

// The ranks of `world` that share this node's memory, as a communicator the caller frees.
MPI_Comm node_comm(MPI_Comm world) {
  MPI_Comm node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  return node;
}

int world_rank(MPI_Comm world) {
  int r = 0;
  check_mpi(MPI_Comm_rank(world, &r), "MPI_Comm_rank");
  return r;
}

// Whether every rank of `world` has `mine` true (collective).
bool all_ranks(MPI_Comm world, bool mine) {
  int local = mine ? 1 : 0, all = 0;
  check_mpi(MPI_Allreduce(&local, &all, 1, MPI_INT, MPI_MIN, world), "MPI_Allreduce");
  return all == 1;
}

std::string gpus(int n) { return std::to_string(n) + (n == 1 ? " GPU" : " GPUs"); }

}  // namespace

DeviceAssignment select_device_for_local_rank(MPI_Comm world) {
  DeviceAssignment a;
  MPI_Comm node = node_comm(world);
  check_mpi(MPI_Comm_rank(node, &a.local_rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(node, &a.local_ranks), "MPI_Comm_size");
  MPI_Comm_free(&node);
  cudaError_t status = cudaGetDeviceCount(&a.visible_devices);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    a.visible_devices = 0;
  }
  // Agreed on before anyone throws, so that no rank is left waiting in a later collective.
  if (!all_ranks(world, a.visible_devices > 0)) {
    if (a.visible_devices == 0)
      throw_error("world rank ", world_rank(world), " sees no CUDA device (cudaGetDeviceCount: ",
                  cudaGetErrorName(status), ": ", cudaGetErrorString(status),
                  "); the CUDA path needs a GPU per rank, or run on the host backend");
    throw_error("another rank sees no CUDA device; the CUDA path needs a GPU on every rank");
  }
  a.device = a.local_rank % a.visible_devices;
  MDTP_CUDA_CHECK(cudaSetDevice(a.device));
  return a;
}

GpuSharing measure_gpu_sharing(MPI_Comm world) {
  GpuSharing s;
  int device = 0;
  MDTP_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp props{};
  MDTP_CUDA_CHECK(cudaGetDeviceProperties(&props, device));
  MPI_Comm node = node_comm(world);
  check_mpi(MPI_Comm_size(node, &s.local_ranks), "MPI_Comm_size");
  constexpr int kUuidBytes = sizeof(props.uuid.bytes);
  std::vector<char> all(static_cast<std::size_t>(kUuidBytes * s.local_ranks));
  int rc = MPI_Allgather(props.uuid.bytes, kUuidBytes, MPI_BYTE, all.data(), kUuidBytes, MPI_BYTE, node);
  MPI_Comm_free(&node);
  check_mpi(rc, "MPI_Allgather(GPU UUIDs)");
  std::set<std::string> distinct;
  for (int r = 0; r < s.local_ranks; ++r)
    distinct.emplace(all.data() + static_cast<std::size_t>(r * kUuidBytes), static_cast<std::size_t>(kUuidBytes));
  s.distinct_gpus = static_cast<int>(distinct.size());
  return s;
}

DeviceCommFactory make_nccl_comm_factory(const CudaBackend& backend, MPI_Comm world, const Topology* mesh) {
  MDTP_CUDA_CHECK(cudaSetDevice(backend.device_index()));
  GpuSharing s = measure_gpu_sharing(world);
  const bool shared_here = s.local_ranks > s.distinct_gpus;
  if (!all_ranks(world, !shared_here)) {
    if (shared_here)
      throw_error("NCCL needs one GPU per rank: ", s.local_ranks, " ranks on this node share ", gpus(s.distinct_gpus),
                  "; use the MPI communicator (MDTP_COMM=mpi) to test with shared GPUs");
    throw_error("NCCL needs one GPU per rank: ranks on another node share GPUs; use the MPI communicator "
                "(MDTP_COMM=mpi) to test with shared GPUs");
  }
  const CudaBackend* b = &backend;
  auto context = std::make_shared<NcclRankContext>();  // shared by all groups of this rank
  std::shared_ptr<NcclMeshSplits> splits;
  if (mesh != nullptr && NcclMeshSplits::supported(world)) {
    splits = std::make_shared<NcclMeshSplits>(backend, world, *mesh);
    context->keep_alive(splits);  // the parent outlives the communicators split from it
  }
  return [b, context, splits](const std::string& name, MPI_Comm group_comm, CommLedger* ledger) {
    // The split is collective over the whole world, and the Mesh asks for its groups in the order
    // the splits follow; a group the mesh's order does not have next is refused there.
    ncclComm_t nccl = splits ? splits->split(name) : nullptr;
    return make_nccl_communicator(name, group_comm, ledger, *b, context, nccl);
  };
}

DeviceCommFactory make_staged_mpi_comm_factory(const CudaBackend& backend, WaitPolicy policy,
                                               std::shared_ptr<Allocator> host_staging) {
  if (!host_staging) host_staging = std::make_shared<HostAllocator>();  // one, shared by all groups
  const CudaBackend* b = &backend;
  return [b, policy, host_staging](const std::string& name, MPI_Comm group_comm, CommLedger* ledger) {
    return make_staged_mpi_communicator(name, group_comm, ledger, *b, policy, host_staging);
  };
}

const char* device_comm_kind_name(DeviceCommKind kind) { return kind == DeviceCommKind::nccl ? "nccl" : "mpi"; }

DeviceCommKind resolve_device_comm_kind() {
  const char* raw = std::getenv("MDTP_COMM");
  std::string_view value = raw ? raw : "";
  if (value.empty() || value == "nccl") return DeviceCommKind::nccl;
  if (value == "mpi") return DeviceCommKind::mpi;
  throw_error("MDTP_COMM='", value, "' is not a device communicator; expected nccl or mpi");
}

DeviceCommFactory make_device_comm_factory(const CudaBackend& backend, MPI_Comm world, DeviceCommKind kind,
                                           WaitPolicy policy, std::shared_ptr<Allocator> host_staging,
                                           const Topology* mesh) {
  if (kind == DeviceCommKind::nccl) return make_nccl_comm_factory(backend, world, mesh);
  return make_staged_mpi_comm_factory(backend, policy, std::move(host_staging));
}

}  // namespace mdtp
