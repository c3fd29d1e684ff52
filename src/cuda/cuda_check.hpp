#pragma once
// One way to check every CUDA runtime, cuBLAS and NCCL status: MDTP_CUDA_CHECK(call) throws an
// mdtp::Error naming the call, the file:line and the library's own error string, so a failure on
// rank 13 of 64 says what failed without a debugger.  Destructors use cuda_ok_in_destructor()
// instead: they must not throw, and at process exit the runtime may already be unloading.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

namespace mdtp {

[[noreturn]] void throw_cuda_status(const char* library, int code, const char* message,
                                    const char* call, const char* file, int line);

inline void check_status(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess)
    throw_cuda_status("CUDA", static_cast<int>(status), cudaGetErrorString(status), call, file, line);
}
void check_status(cublasStatus_t status, const char* call, const char* file, int line);
void check_status(ncclResult_t status, const char* call, const char* file, int line);

// For destructors: reports (to stderr) instead of throwing; returns whether the call succeeded.
bool cuda_ok_in_destructor(cudaError_t status, const char* call);

}  // namespace mdtp

#define MDTP_CUDA_CHECK(call) ::mdtp::check_status((call), #call, __FILE__, __LINE__)
