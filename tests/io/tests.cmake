mdtp_add_mpi_test(io SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_results_file.cpp RANKS 1 LIBS mdtp_io)
