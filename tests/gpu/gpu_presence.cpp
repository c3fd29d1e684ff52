#include "gpu/gpu_presence.hpp"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace mdtp::gpu_test {
namespace {

// Whether the kernel exposes an NVIDIA GPU to this process at all: a driver, if one is loaded,
// creates these nodes, and containers get them only when GPUs are passed through.
const char* nvidia_device_node() {
  for (const char* node : {"/dev/nvidiactl", "/dev/dxg"})
    if (access(node, F_OK) == 0) return node;
  return nullptr;
}

std::string describe(cudaError_t status) {
  return std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
}

// rank < 0: a program without MPI.
[[noreturn]] void leave(const char* program, const GpuProbe& probe, int rank) {
  const std::string who = rank < 0 ? std::string(program) : std::string(program) + ", rank " + std::to_string(rank);
  if (probe.presence == GpuPresence::broken)
    std::fprintf(stderr, "FAILED: %s: the CUDA setup is broken: %s\n", who.c_str(), probe.detail.c_str());
  else
    std::fprintf(stderr, "SKIPPED: no GPU available (%s: %s)\n", who.c_str(), probe.detail.c_str());
  std::fflush(stderr);
  if (rank >= 0) MPI_Finalize();
  std::exit(probe.presence == GpuPresence::broken ? 1 : kSkipExitCode);
}

}  // namespace

GpuProbe probe_gpu() {
  GpuProbe probe;
  const cudaError_t status = cudaGetDeviceCount(&probe.devices);
  if (status == cudaSuccess) {
    probe.presence = probe.devices > 0 ? GpuPresence::usable : GpuPresence::absent;
    probe.detail = "cudaGetDeviceCount: " + std::to_string(probe.devices) + " devices";
    return probe;
  }
  (void)cudaGetLastError();  // not sticky; cleared so that nothing later trips over it
  probe.devices = 0;
  probe.detail = "cudaGetDeviceCount returned " + describe(status);
  if (status == cudaErrorNoDevice) {
    probe.presence = GpuPresence::absent;
    return probe;
  }
  const bool no_driver_library = status == cudaErrorInsufficientDriver || status == cudaErrorStubLibrary;
  const char* node = nvidia_device_node();
  if (no_driver_library && node == nullptr) {
    probe.presence = GpuPresence::absent;
    probe.detail += "; no NVIDIA device node (/dev/nvidiactl, /dev/dxg): no driver installed";
    return probe;
  }
  probe.presence = GpuPresence::broken;
  if (node != nullptr) probe.detail += std::string("; yet ") + node + " exists, so a GPU driver is there";
  return probe;
}

void exit_unless_gpu(const char* program) {
  const GpuProbe probe = probe_gpu();
  if (probe.presence != GpuPresence::usable) leave(program, probe, -1);
}

void exit_unless_gpu_on_every_rank(const char* program, MPI_Comm comm) {
  const GpuProbe probe = probe_gpu();
  // 0 usable, 1 absent, 2 broken: the maximum over the ranks decides for all of them.
  const int mine = probe.presence == GpuPresence::usable ? 0 : probe.presence == GpuPresence::absent ? 1 : 2;
  int worst = 0, rank = 0;
  MPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, comm);
  if (worst == 0) return;
  MPI_Comm_rank(comm, &rank);
  GpuProbe verdict = probe;
  verdict.presence = worst == 2 ? GpuPresence::broken : GpuPresence::absent;
  if (mine == 0) verdict.detail = worst == 2 ? "usable here; another rank's setup is broken" : "usable here; another rank has none";
  // Rank 0 always says why; other ranks only about themselves, so each cause is printed once.
  if (rank == 0 || mine != 0) leave(program, verdict, rank);
  MPI_Finalize();
  std::exit(worst == 2 ? 1 : kSkipExitCode);
}

}  // namespace mdtp::gpu_test
