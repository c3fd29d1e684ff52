mdtp_add_mpi_test(io SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_results_file.cpp RANKS 1 LIBS mdtp_io)

# Safetensors reading and writing (io/safetensors.hpp).  Two of its cases hold mdtp against a second
# reading of the format, tests/io/write_safetensors.py (struct, json and numpy, not the safetensors
# library): a file it writes is read back, and a file mdtp writes is checked by it.  Those two cases
# run the script themselves, with the python3 named here; where no python3 imports numpy they pass
# with a warning saying they did not run.
mdtp_add_mpi_test(safetensors SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_safetensors.cpp RANKS 1 LIBS mdtp_io)
mdtp_find_python(MDTP_NUMPY_PYTHON "numpy" "python3 with numpy (test_safetensors' cross-checks)")
if(NOT MDTP_NUMPY_PYTHON)
  message(STATUS "mdtp: no python3 with numpy: test_safetensors skips its cross-checks with write_safetensors.py")
endif()
target_compile_definitions(test_safetensors PRIVATE MDTP_NUMPY_PYTHON="${MDTP_NUMPY_PYTHON}"
                           MDTP_SAFETENSORS_SCRIPT="${CMAKE_CURRENT_LIST_DIR}/write_safetensors.py")
