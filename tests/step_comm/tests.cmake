# The whole-step byte plan (src/cost/gpt_step_comm.hpp) against mdtp::train's ledger on every rank,
# in a grid of configurations (every TP mode, pipelines under each schedule, dp, ZeRO stages; GPT-2
# and Llama with kv < heads, tied and untied heads), and
# the bucket plan it derives against the ZeRO engine's.  The CI form runs the [ci] cases at 8
# ranks; the `slow` form the larger grid.
mdtp_add_mpi_test(step_comm SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_step_comm.cpp
                  RANKS 8 LABELS cost ARGS "[ci]" TIMEOUT 300)
add_test(NAME step_comm_slow_np8
         COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 8 ${MPIEXEC_PREFLAGS} $<TARGET_FILE:test_step_comm>
                 ${MPIEXEC_POSTFLAGS} "[slow]")
set_tests_properties(step_comm_slow_np8 PROPERTIES LABELS "mpi;cost;slow" TIMEOUT 900 PROCESSORS 1)
