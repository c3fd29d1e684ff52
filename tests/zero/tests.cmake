# ZeRO (src/zero, src/plan/bucket_plan).  Rank counts: 1, 2, 3 (dp = 3 divides no bucket), 4 and 8
# (tp = 1 with dp = world; 1D, 1D-SP, 2D, 2.5D and 3D with dp = 2 or 4, or 1 where only the mode
# fits).  Two binaries so that each run stays short at 8 ranks on 2 cores:
#  - zero: the bucket plan; memory and ledger bytes against the plan; checkpoints; the overlap of
#    stage 2's reduce-scatters with backward; hooks; refused configurations; the planner's ZeRO
#    memory against the plan;
#  - zero_parity: every stage, with and without offload, against the unsharded optimizer; bf16 with
#    f32 masters (values = rounded masters after every step, stages against stage 0).
set(MDTP_ZERO_HARNESS ${CMAKE_CURRENT_LIST_DIR}/zero_harness.cpp)
mdtp_add_mpi_test(zero SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_bucket_plan.cpp ${CMAKE_CURRENT_LIST_DIR}/test_zero_accounting.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_zero_checkpoint.cpp ${CMAKE_CURRENT_LIST_DIR}/test_zero_engine.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_zero_pipeline.cpp ${CMAKE_CURRENT_LIST_DIR}/test_zero_step_model.cpp
                  ${MDTP_ZERO_HARNESS}
                  RANKS 1 2 3 4 8 LABELS zero TIMEOUT 300)
mdtp_add_mpi_test(zero_parity SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_zero_parity.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_zero_bf16.cpp ${MDTP_ZERO_HARNESS}
                  RANKS 1 2 3 4 LABELS zero TIMEOUT 300)
# At 8 ranks the whole matrix (five meshes, ~3 minutes on 2 cores) is label `slow`; CI runs the two
# meshes no smaller world has, 3D q 2 and 2.5D q 2 d 2 (Catch2 sections named by the case's label).
add_test(NAME zero_parity_full_np8
         COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 8 ${MPIEXEC_PREFLAGS} $<TARGET_FILE:test_zero_parity>
                 ${MPIEXEC_POSTFLAGS})
set_tests_properties(zero_parity_full_np8 PROPERTIES LABELS "mpi;zero;slow" TIMEOUT 900 PROCESSORS 1)
foreach(mesh IN ITEMS "3d world=8 tp=8" "2.5d world=8 tp=8 d=2")
  string(REGEX REPLACE "^([0-9.]+)d.*" "\\1" kind "${mesh}")
  string(REPLACE "." "p" kind "${kind}")
  add_test(NAME zero_parity_${kind}d_np8
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 8 ${MPIEXEC_PREFLAGS}
                   $<TARGET_FILE:test_zero_parity> ${MPIEXEC_POSTFLAGS} -c "${mesh}")
  set_tests_properties(zero_parity_${kind}d_np8 PROPERTIES LABELS "mpi;zero" TIMEOUT 300 PROCESSORS 1)
endforeach()
