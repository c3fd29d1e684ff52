#include "core/host_info.hpp"

#include "core/blas_library.hpp"
#include "core/cpu_features.hpp"
#include "core/host_gemm.hpp"
#include "core/large_allocations.hpp"
#include "core/vector_math.hpp"

namespace mdtp {

HostInfo host_info() {
  const CpuFeatures& cpu = cpu_features();
  const BlasLibrary& blas = blas_library();
  HostInfo info;
  info.cpu_model = cpu.model;
  info.cpu_extensions = join_flags(cpu.flags);
  info.compiled_for = join_flags(compiled_flags());
  info.gemm = gemm_engine_name(default_gemm_engine());
  info.blas_library = blas.linked ? blas.name : "none";
  info.blas_core = blas.core;
  info.blas_threads = blas.threads;
  info.blas_note = blas.note;
  info.vector_math = vector_math_name();
  info.malloc = large_allocation_policy().description;
  return info;
}

std::vector<std::pair<std::string, std::string>> HostInfo::attributes() const {
  return {{"host_cpu_model", cpu_model},
          {"host_cpu_extensions", cpu_extensions},
          {"host_compiled_for", compiled_for},
          {"host_gemm", gemm},
          {"host_blas_library", blas_library},
          {"host_blas_core", blas_core},
          {"host_blas_threads", std::to_string(blas_threads)},
          {"host_blas_note", blas_note},
          {"host_vector_math", vector_math},
          {"host_malloc", malloc}};
}

std::string HostInfo::to_string() const {
  std::string out;
  for (const auto& [key, value] : attributes()) out += key + ": " + value + "\n";
  return out;
}

}  // namespace mdtp
