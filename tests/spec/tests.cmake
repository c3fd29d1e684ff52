# The run spec (src/spec): its enums' names, validate's rules, and its JSON — every member written,
# exact round trips, defaults for missing keys, one-line refusals.  One rank: nothing here
# communicates, and the test links only mdtp_spec (the layer has no MPI).
mdtp_add_mpi_test(spec SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_run_spec.cpp RANKS 1 LABELS spec LIBS mdtp_spec)
