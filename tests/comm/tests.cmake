# Comm layer: ledger and validation (no MPI traffic), the MPI communicator against serial
# results on sub-groups of several shapes, wait policy, cross-rank ledger statistics.
# test_comm "[.bench]" times a small all-reduce under each wait policy (not run by ctest).
mdtp_add_mpi_test(comm
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ledger.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_mpi_collectives.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_mpi_ledger.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_comm_bench.cpp
  RANKS 1 2 3 4 8 27
  LIBS mdtp_comm)

# Sync timing (wait for the last peer apart from the transfer): 2 and 3 ranks, one of them 1 s
# late; the only timed assertions are that 1 s sleep against bounds at 0.5 s (robust to a loaded
# machine).
mdtp_add_mpi_test(comm_sync_timing
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_sync_timing.cpp
  RANKS 2 3
  LIBS mdtp_comm)

# The same MPI collective checks with the ring collectives (comm/ring_collectives.hpp: what the
# SMPI build runs) in place of the MPI library's all-reduce, all-gather and reduce-scatter.
foreach(np 2 3 4 8)
  add_test(NAME comm_rings_np${np}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS} $<TARGET_FILE:test_comm>
                   ${MPIEXEC_POSTFLAGS} "[mpi]")
  set_tests_properties(comm_rings_np${np} PROPERTIES LABELS "mpi;comm" TIMEOUT 600 PROCESSORS 1
                       ENVIRONMENT "MDTP_COLLECTIVES=ring")
endforeach()
