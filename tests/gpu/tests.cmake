# GPU tests (label "gpu"): built only with MDTP_CUDA=ON.  Without a GPU every binary prints
# "SKIPPED: no GPU available" and exits 77, which SKIP_RETURN_CODE turns into a ctest "Skipped"
# (never a pass); a broken CUDA setup fails instead (gpu_presence.hpp).  See docs/GPU.md.
if(MDTP_CUDA)
  set(MDTP_GPU_SKIP_CODE 77)

  # Whether a GPU is usable, absent (skip) or broken (fail): one helper for the listener above and
  # for the two benchmarks (gpu_presence.hpp).
  find_package(CUDAToolkit REQUIRED)  # imported targets are per directory: CUDA::cudart here
  add_library(mdtp_gpu_presence STATIC ${CMAKE_CURRENT_LIST_DIR}/gpu_presence.cpp)
  target_include_directories(mdtp_gpu_presence PUBLIC ${CMAKE_SOURCE_DIR}/tests)
  target_link_libraries(mdtp_gpu_presence PUBLIC CUDA::cudart MPI::MPI_CXX PRIVATE mdtp_warnings)

  # One rank: every CudaBackend op against the host backend, the allocator, the extra training ops;
  # and the kernels at realistic sizes (H = 2048, T = 1024, vocabulary 50304) in f32 and bf16.
  mdtp_add_mpi_test(gpu_backend
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/gpu_skip_listener.cpp ${CMAKE_CURRENT_LIST_DIR}/test_cuda_backend.cpp
            ${CMAKE_CURRENT_LIST_DIR}/test_cuda_allocator.cpp ${CMAKE_CURRENT_LIST_DIR}/test_train_ops.cpp
            ${CMAKE_CURRENT_LIST_DIR}/test_cuda_train_backend.cpp ${CMAKE_CURRENT_LIST_DIR}/test_realistic_sizes.cpp
    RANKS 1 LIBS mdtp_cuda mdtp_lib mdtp_gpu_presence LABELS gpu)

  # Communicators: NCCL (multi-rank only where each rank has its own GPU) and the staged MPI
  # communicator, whose 2- and 4-rank runs share one GPU.
  mdtp_add_mpi_test(gpu_comm
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/gpu_skip_listener.cpp ${CMAKE_CURRENT_LIST_DIR}/test_nccl_communicator.cpp
            ${CMAKE_CURRENT_LIST_DIR}/test_staged_communicator.cpp
    RANKS 1 2 4 LIBS mdtp_cuda mdtp_lib mdtp_gpu_presence LABELS gpu)

  set_tests_properties(gpu_backend_np1 gpu_comm_np1 gpu_comm_np2 gpu_comm_np4
                       PROPERTIES SKIP_RETURN_CODE ${MDTP_GPU_SKIP_CODE})

  # Tensor-parallel layers on the CUDA backend against the serial f64 reference: every mode with
  # tp=1 over NCCL at one rank; 1D/1D-SP (2 ranks), + 2D, 2.5D d=1 (4), 2.5D d=2, 3D (8) with
  # ranks sharing one GPU over the staged MPI communicator (automatic, or MDTP_COMM).
  # tests/support gives ModeCase and the reference helpers; its host ModeFixture goes unused.
  mdtp_add_mpi_test(gpu_tp_layers
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/gpu_skip_listener.cpp ${CMAKE_CURRENT_LIST_DIR}/test_gpu_tp_layers.cpp
    RANKS 1 2 4 8 LIBS mdtp_cuda mdtp_lib mdtp_gpu_presence LABELS gpu)
  set_tests_properties(gpu_tp_layers_np1 gpu_tp_layers_np2 gpu_tp_layers_np4 gpu_tp_layers_np8
                       PROPERTIES SKIP_RETURN_CODE ${MDTP_GPU_SKIP_CODE})

  # A benchmark, not a test: GEMM TFLOP/s through CudaBackend vs raw cuBLAS.
  add_executable(bench_gemm_cuda ${CMAKE_CURRENT_LIST_DIR}/bench_gemm_cuda.cpp)
  target_link_libraries(bench_gemm_cuda PRIVATE mdtp_cuda mdtp_gpu_presence mdtp_warnings)

  # A benchmark, not a test: the streaming kernels of a training step against a bare device copy.
  add_executable(bench_kernels_cuda ${CMAKE_CURRENT_LIST_DIR}/bench_kernels_cuda.cpp)
  target_link_libraries(bench_kernels_cuda PRIVATE mdtp_cuda mdtp_lib mdtp_gpu_presence mdtp_warnings)

  # The GPT model (src/model) on the CUDA backend against the serial host model: loss and every
  # gathered gradient after one forward+backward, f64 (1e-10) and f32 (1e-4); mode none at one
  # rank, 1d/2d/1d+dp/dp at 4 ranks sharing one GPU over the staged MPI communicator.
  mdtp_add_mpi_test(gpu_gpt
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/gpu_skip_listener.cpp ${CMAKE_CURRENT_LIST_DIR}/test_gpu_gpt.cpp
    RANKS 1 4 LIBS mdtp_cuda mdtp_lib mdtp_gpu_presence LABELS gpu)
  set_tests_properties(gpu_gpt_np1 gpu_gpt_np4 PROPERTIES SKIP_RETURN_CODE ${MDTP_GPU_SKIP_CODE})

  # A benchmark, not a test: GPT training steps (tokens/s, model TFLOP/s, MFU), one rank per GPU.
  add_executable(bench_gpt_cuda ${CMAKE_CURRENT_LIST_DIR}/bench_gpt_cuda.cpp)
  target_link_libraries(bench_gpt_cuda PRIVATE mdtp_cuda mdtp_lib mdtp_test_support mdtp_gpu_presence MPI::MPI_CXX
                        mdtp_warnings)
endif()

# `mdtp train --device cuda` against the host run of the same spec (tests/gpu/train_parity.sh): every
# TP mode, ZeRO 1-3 (stage 2 with offload), 1F1B and ZB-H1 pipelines, one step, gradients and
# parameters per tensor within 1e-5 (f32), 2e-2 under bf16 mixed precision (every TP mode, ZeRO 3,
# offload, 1F1B); a checkpoint resumed on the device bit for bit.  Ranks
# share one GPU over the staged MPI communicator.  Skipped (77) where no NVIDIA driver is installed.
if(MDTP_CUDA)
  set(_parity_env "")
  if(MDTP_ANALYSIS_PYTHON)
    set(_parity_env "PYTHON=${MDTP_ANALYSIS_PYTHON}")
  endif()
  add_test(NAME gpu_train_parity
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/train_parity.sh $<TARGET_FILE:mdtp> ${MPIEXEC_EXECUTABLE}
                   ${CMAKE_BINARY_DIR}/test-gpu-train-parity)
  set_tests_properties(gpu_train_parity PROPERTIES LABELS "gpu;mpi;train" SKIP_RETURN_CODE ${MDTP_GPU_SKIP_CODE}
                       TIMEOUT 600 ENVIRONMENT "${_parity_env}")

  # Pipelines over NCCL are refused on every rank before anything starts (no GPU needed to check).
  if(MDTP_CLI_PYTHON)
    add_test(NAME cli_mpi_nccl_pipeline_refused_np2
             COMMAND ${_cli} --mpiexec ${MPIEXEC_EXECUTABLE} mpi-bad 2 train
                     "pipelines over NCCL are not supported yet" -- train --device cuda --pp 2 --micro-batches 2 --steps 1)
    set_tests_properties(cli_mpi_nccl_pipeline_refused_np2 PROPERTIES LABELS "cli;mpi" TIMEOUT 120)
  endif()
endif()

# Everything the CUDA variant needs for its tests, so CI can build just that (the host tests are
# built and run in the host build).
if(MDTP_CUDA)
  add_custom_target(mdtp_gpu_tests DEPENDS test_gpu_backend test_gpu_comm test_gpu_tp_layers test_gpu_gpt bench_gemm_cuda
                    bench_kernels_cuda bench_gpt_cuda mdtp)
endif()
