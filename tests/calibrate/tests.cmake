# The calibration schema: what `mdtp calibrate` writes is what `mdtp cost`/`bench --calibration`
# read (one writer, one reader, src/calibrate/calibration_io.*).  The end-to-end check with the
# real program is cost_reads_calibration in tests/bench/tests.cmake.
mdtp_add_mpi_test(calibrate_io SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_calibration_io.cpp RANKS 1 LABELS calibrate)

# `mdtp calibrate --cluster-out`: the machine as a cluster file (links and GEMM rates as fitted,
# one device per rank) that `mdtp plan` reads; a malformed --peak-flops refused on every rank.
find_program(MDTP_CALIBRATE_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(MDTP_CALIBRATE_PYTHON)
  add_test(NAME calibrate_cluster_file_np2
           COMMAND ${MDTP_CALIBRATE_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_cluster_file.py --mdtp $<TARGET_FILE:mdtp>
                   --mpiexec ${MPIEXEC_EXECUTABLE} --dir ${CMAKE_CURRENT_BINARY_DIR}/calibrate_cluster_file)
  set_tests_properties(calibrate_cluster_file_np2 PROPERTIES LABELS "calibrate;mpi" TIMEOUT 300)
endif()
