#include "cuda/cuda_check.hpp"

#include <cstdio>

#include "core/error.hpp"

namespace mdtp {

void throw_cuda_status(const char* library, int code, const char* message, const char* call,
                       const char* file, int line) {
  throw_error(library, " call failed: ", call, " returned ", code, " (", message, ") at ", file, ":",
              line);
}

void check_status(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw_cuda_status("cuBLAS", static_cast<int>(status), cublasGetStatusString(status), call, file,
                      line);
}

void check_status(ncclResult_t status, const char* call, const char* file, int line) {
  if (status != ncclSuccess)
    throw_cuda_status("NCCL", static_cast<int>(status), ncclGetErrorString(status), call, file, line);
}

bool cuda_ok_in_destructor(cudaError_t status, const char* call) {
  // Unloading at exit is expected when objects outlive main(); anything else is worth a line.
  if (status == cudaSuccess || status == cudaErrorCudartUnloading) return status == cudaSuccess;
  std::fprintf(stderr, "mdtp: %s failed in a destructor: %s\n", call, cudaGetErrorString(status));
  return false;
}

}  // namespace mdtp
