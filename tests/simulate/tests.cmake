# The simulated cluster (docs/simulate.md): the platform generator, the charging backend and the
# run context, without SimGrid; `mdtp simulate`'s refusals; and, where an SMPI build of mdtp and
# SimGrid's smpirun are present (label smpi), the real engines at 64 simulated ranks.
mdtp_add_mpi_test(simulate SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_platform.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_link_traffic.cpp RANKS 1 LABELS simulate LIBS mdtp_lib)
# Synthetic values: the allocator, the charging backend over it, the rings on its tensors (1 and 3
# ranks: a ring of one and an odd ring).
mdtp_add_mpi_test(simulate_synthetic SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_synthetic_values.cpp RANKS 1 3
                  LABELS simulate LIBS mdtp_lib)
# The step model's list of the engine's kernels (`mdtp cost --engine-kernels`) against the kernels
# one block launches in every TP mode, GPT-2 and Llama, counted by the charging backend.
mdtp_add_mpi_test(engine_kernels SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_engine_kernels.cpp RANKS 1 2 4 8
                  LABELS simulate cost LIBS mdtp_lib TIMEOUT 300)
mdtp_find_python(MDTP_SIMULATE_PYTHON "h5py, numpy" "python3 with h5py for the simulate tests")
if(MDTP_SIMULATE_PYTHON)
  add_test(NAME simulate_cli
           COMMAND ${MDTP_SIMULATE_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/simulate_cli.py $<TARGET_FILE:mdtp>)
  set_tests_properties(simulate_cli PROPERTIES LABELS "simulate;cli;smpi" TIMEOUT 900)
endif()
