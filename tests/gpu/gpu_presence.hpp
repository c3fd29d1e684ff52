#pragma once
// Whether this process can use a GPU, told apart from a broken CUDA setup.  The GPU tests and
// benchmarks skip (exit 77, "SKIPPED: no GPU available") only when there is no GPU to use, and
// fail on anything else, so that a broken driver never reads as "no GPU" and a whole GPU suite
// can never turn Skipped where it should have failed.
//
// No GPU:
//  - cudaGetDeviceCount returns cudaErrorNoDevice, or succeeds with a count of 0;
//  - no NVIDIA driver at all: the runtime finds no libcuda to load (cudaErrorInsufficientDriver)
//    or only the toolkit's stub (cudaErrorStubLibrary), on a machine that exposes no NVIDIA
//    device node (/dev/nvidiactl; /dev/dxg under WSL).  A CI machine with the CUDA toolkit and no
//    driver is this case: the runtime cannot tell "no driver" from "too old a driver", the
//    device nodes can.
// Broken (fails, naming cudaGetErrorName and cudaGetErrorString): any other error, and those two
// where device nodes exist (a driver too old for the runtime, a stub shadowing the real libcuda).
#include <mpi.h>

#include <string>

namespace mdtp::gpu_test {

inline constexpr int kSkipExitCode = 77;

enum class GpuPresence { usable, absent, broken };

struct GpuProbe {
  GpuPresence presence = GpuPresence::absent;
  int devices = 0;
  std::string detail;  // what cudaGetDeviceCount said, for the SKIPPED / FAILED line
};

// This process's view (not collective).
GpuProbe probe_gpu();

// For a program without MPI: returns when a GPU is usable; otherwise prints
// "SKIPPED: no GPU available (...)" and exits 77, or "FAILED: ..." and exits 1.
void exit_unless_gpu(const char* program);

// The same, collective over `comm` (MPI initialised): the ranks agree first, so that all of them
// leave alike, after MPI_Finalize: 1 when any rank's setup is broken, else 77 when any rank has no
// GPU.  Returns on every rank when every rank has a usable GPU.
void exit_unless_gpu_on_every_rank(const char* program, MPI_Comm comm);

}  // namespace mdtp::gpu_test
