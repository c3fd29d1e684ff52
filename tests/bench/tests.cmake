# Experiment drivers (src/bench, `mdtp calibrate`, `mdtp bench`, experiments/analysis).
#  - bench_units: the drivers' pure pieces (mesh choice per mode, α-β fit, timed backend) and the
#    layer runner on 1 and 4 ranks, measured bytes equal to the model's;
#  - the `mdtp` program end to end, under mpiexec, into a fresh directory of the build tree:
#    calibrate on 2 ranks (tiny sweep), bench on 4 ranks twice into one file (appending; the
#    second run using the calibration and sync timing), then a Python check of the file with h5py and of
#    report.py's PNGs and summary.md;
#  - the refusal of an oversubscribed calibration (exit 2, clear message, no file).
mdtp_add_mpi_test(bench_units SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_bench_units.cpp RANKS 1 4 8 LABELS bench)
# Sync timing in the layer runner: bytes unchanged and equal to the model's, the wait recorded.
mdtp_add_mpi_test(bench_sync_timing SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_sync_timing_bench.cpp RANKS 2 4
                  LABELS bench TIMEOUT 120)

# A python3 that imports h5py, numpy and matplotlib.
mdtp_find_python(MDTP_ANALYSIS_PYTHON "h5py, numpy, matplotlib" "python3 with h5py, numpy and matplotlib (analysis tests)")

set(_bench_dir ${CMAKE_BINARY_DIR}/test-bench)
set(_mdtp_run ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG})
set(_tiny --global-batch 2 --seq 8 --hidden 16 --ffn-hidden 32 --warmup 1 --reps 2 --out ${_bench_dir}/bench.h5)

add_test(NAME bench_prepare COMMAND ${CMAKE_COMMAND} -E rm -rf ${_bench_dir})
set_tests_properties(bench_prepare PROPERTIES FIXTURES_SETUP bench_dir LABELS bench)

add_test(NAME calibrate_np2
         COMMAND ${_mdtp_run} 2 ${MPIEXEC_PREFLAGS} $<TARGET_FILE:mdtp> calibrate
                 --max-bytes 4K --iters 3 --warmup 1 --out ${_bench_dir}/calibration.h5)
add_test(NAME bench_np4_first
         COMMAND ${_mdtp_run} 4 ${MPIEXEC_PREFLAGS} $<TARGET_FILE:mdtp> bench --modes all ${_tiny})
add_test(NAME bench_np4_append
         COMMAND ${_mdtp_run} 4 ${MPIEXEC_PREFLAGS} $<TARGET_FILE:mdtp> bench --modes all ${_tiny}
                 --calibration ${_bench_dir}/calibration.h5 --sync-timing)
set_tests_properties(calibrate_np2 PROPERTIES FIXTURES_REQUIRED bench_dir FIXTURES_SETUP bench_calibration)
set_tests_properties(bench_np4_first PROPERTIES FIXTURES_REQUIRED bench_dir FIXTURES_SETUP bench_runs)
set_tests_properties(bench_np4_append PROPERTIES FIXTURES_REQUIRED "bench_dir;bench_calibration"
                     FIXTURES_SETUP bench_runs DEPENDS bench_np4_first)
set_tests_properties(calibrate_np2 bench_np4_first bench_np4_append PROPERTIES LABELS "bench;mpi" TIMEOUT 600
                     PROCESSORS 1)
# calibrate → cost on the same file: `mdtp cost` reads what `mdtp calibrate` wrote (one schema).
add_test(NAME cost_reads_calibration
         COMMAND $<TARGET_FILE:mdtp> cost --tp-mode 2d --tp 4 --dp 2 --micro-batch-size 8 --seq 512 --hidden 1024
                 --calibration ${_bench_dir}/calibration.h5)
set_tests_properties(cost_reads_calibration PROPERTIES FIXTURES_REQUIRED bench_calibration DEPENDS calibrate_np2
                     LABELS bench PASS_REGULAR_EXPRESSION "calibration ${_bench_dir}/calibration.h5"
                     FAIL_REGULAR_EXPRESSION "error")

if(MDTP_ANALYSIS_PYTHON)
  add_test(NAME bench_results_check
           COMMAND ${MDTP_ANALYSIS_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_bench_results.py
                   --bench ${_bench_dir}/bench.h5 --calibration ${_bench_dir}/calibration.h5
                   --report ${CMAKE_SOURCE_DIR}/experiments/analysis/report.py --out ${_bench_dir}/report
                   --batches 2 --modes 1d,1d-sp,2d,2.5d)
  set_tests_properties(bench_results_check PROPERTIES FIXTURES_REQUIRED "bench_runs;bench_calibration"
                       DEPENDS "bench_np4_append;calibrate_np2" LABELS bench)
  # train_report.py's verdicts (bytes and memory vs model) on real train runs and on copies with
  # one number changed.
  add_test(NAME train_report_check
           COMMAND ${MDTP_ANALYSIS_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_train_report.py
                   --mpiexec ${MPIEXEC_EXECUTABLE} --mdtp $<TARGET_FILE:mdtp>
                   --analysis ${CMAKE_SOURCE_DIR}/experiments/analysis --dir ${CMAKE_BINARY_DIR}/test-train-report)
  set_tests_properties(train_report_check PROPERTIES LABELS "bench;mpi" TIMEOUT 300)
else()
  message(STATUS "mdtp: no python3 with h5py/numpy/matplotlib: bench_results_check and train_report_check are not registered")
endif()

if(MDTP_ANY_PYTHON)
  add_test(NAME calibrate_refuses_oversubscribed
           COMMAND ${MDTP_ANY_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_calibrate_refusal.py
                   --mpiexec ${MPIEXEC_EXECUTABLE} --mdtp $<TARGET_FILE:mdtp> --dir ${_bench_dir}/refused)
  set_tests_properties(calibrate_refuses_oversubscribed PROPERTIES FIXTURES_REQUIRED bench_dir LABELS "bench;mpi")
endif()
