# The calibration schema: what `mdtp calibrate` writes is what `mdtp cost`/`bench --calibration`
# read (one writer, one reader, src/calibrate/calibration_io.*).  The end-to-end check with the
# real program is cost_reads_calibration in tests/bench/tests.cmake.
mdtp_add_mpi_test(calibrate_io SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_calibration_io.cpp RANKS 1 LABELS calibrate)
