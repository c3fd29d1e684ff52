mdtp_add_mpi_test(core SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tensor.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_host_backend.cpp RANKS 1 LIBS mdtp_core)
