mdtp_add_mpi_test(core SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tensor.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_host_backend.cpp ${CMAKE_CURRENT_LIST_DIR}/test_host_gemm.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_host_vector_kernels.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_host_caching_allocator.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_large_allocations.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_host_low_precision.cpp RANKS 1 LIBS mdtp_core)

# OPENBLAS_CORETYPE naming a kernel set the CPU lacks (SkylakeX on a CPU without AVX-512) kills
# OpenBLAS with an illegal instruction at the first GEMM; mdtp must detect it and use Eigen.
add_test(NAME core_blas_coretype_np1
         COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 1 $<TARGET_FILE:test_core> "[blas-coretype]")
set_tests_properties(core_blas_coretype_np1 PROPERTIES LABELS "mpi" TIMEOUT 120 PROCESSORS 1
                     ENVIRONMENT "OPENBLAS_CORETYPE=SkylakeX")

# Parameter initialisation: the vectorised draw against init_value's pinned numbers.
mdtp_add_mpi_test(core_init SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_init_values.cpp RANKS 1 LIBS mdtp_tp)

# bf16/f16 conversions (core/narrow_float.hpp, core/convert.hpp: the host backend's 16-bit storage,
# host staging and the CUDA kernels) against a brute-force nearest-value reference.
mdtp_add_mpi_test(narrow_float SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_narrow_float.cpp RANKS 1 LIBS mdtp_core)
