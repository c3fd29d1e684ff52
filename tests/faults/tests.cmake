# Faults (issue 16): a hung rank, corrupt files, signals, non-finite values, reruns.
mdtp_add_mpi_test(faults SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_collective_watchdog.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_file_integrity.cpp ${CMAKE_CURRENT_LIST_DIR}/test_nonfinite.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_stop_request.cpp
                  RANKS 1 2 LABELS faults TIMEOUT 60)
target_link_libraries(test_faults PRIVATE ZLIB::ZLIB)

# A rank that stops answering ends the job within the deadline plus a margin, with one line
# naming the wait (tests/faults/test_watchdog.py).
add_executable(faults_hang_rank ${CMAKE_CURRENT_LIST_DIR}/hang_rank.cpp)
target_link_libraries(faults_hang_rank PRIVATE mdtp_mesh MPI::MPI_CXX mdtp_warnings)
find_program(MDTP_FAULTS_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(MDTP_FAULTS_PYTHON NAMES python3)
if(MDTP_FAULTS_PYTHON)
  set(_watchdog ${MDTP_FAULTS_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_watchdog.py --mpiexec ${MPIEXEC_EXECUTABLE}
                --timeout 3)
  add_test(NAME faults_watchdog_polite_np2 COMMAND ${_watchdog} --wait polite program $<TARGET_FILE:faults_hang_rank>
                                                   all_reduce)
  add_test(NAME faults_watchdog_library_np2 COMMAND ${_watchdog} --wait library program
                                                    $<TARGET_FILE:faults_hang_rank> all_reduce)
  add_test(NAME faults_watchdog_recv_np3 COMMAND ${_watchdog} --ranks 3 --wait library program
                                                 $<TARGET_FILE:faults_hang_rank> recv)
  add_test(NAME faults_watchdog_barrier_np2 COMMAND ${_watchdog} --wait polite program
                                                    $<TARGET_FILE:faults_hang_rank> barrier)
  add_test(NAME faults_watchdog_mdtp_train_np2 COMMAND ${_watchdog} --wait polite mdtp $<TARGET_FILE:mdtp>)
  set_tests_properties(faults_watchdog_polite_np2 faults_watchdog_library_np2 faults_watchdog_recv_np3
                       faults_watchdog_barrier_np2 faults_watchdog_mdtp_train_np2
                       PROPERTIES LABELS "faults;mpi" TIMEOUT 90)
endif()

if(MDTP_FAULTS_PYTHON)
  # Bad inputs across every command and input file kind: one line, exit 2 on every rank, nothing
  # changed (tests/faults/test_bad_inputs.py).  Two entries, so each stays short on CI.
  set(_bad ${MDTP_FAULTS_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_bad_inputs.py --mdtp $<TARGET_FILE:mdtp>
           --mpiexec ${MPIEXEC_EXECUTABLE})
  add_test(NAME faults_bad_inputs_options COMMAND ${_bad} --only options)
  add_test(NAME faults_bad_inputs_files COMMAND ${_bad} --only files)
  # The same training command twice: bitwise-identical losses, gradients and checkpoints.
  add_test(NAME faults_determinism_tp2_np2
           COMMAND ${MDTP_FAULTS_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_determinism.py --mdtp $<TARGET_FILE:mdtp>
                   --mpiexec ${MPIEXEC_EXECUTABLE} --ranks 2 -- --tp-mode 1d --tp 2 --steps 3 --layers 2 --hidden 32
                   --heads 4 --seq 16 --global-batch 4)
  add_test(NAME faults_determinism_dp2_np2
           COMMAND ${MDTP_FAULTS_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_determinism.py --mdtp $<TARGET_FILE:mdtp>
                   --mpiexec ${MPIEXEC_EXECUTABLE} --ranks 2 -- --tp-mode none --steps 3 --layers 2 --hidden 32
                   --heads 4 --seq 16 --global-batch 4 --dtype f64)
  set_tests_properties(faults_bad_inputs_options faults_bad_inputs_files faults_determinism_tp2_np2
                       faults_determinism_dp2_np2 PROPERTIES LABELS "faults;cli;mpi" TIMEOUT 300)
endif()

if(MDTP_FAULTS_PYTHON)
  # Graceful stop on a signal, the immediate exit on a second one, and non-finite steps, through
  # `mdtp train` (tests/faults/test_stop.py).
  foreach(case signal twice nonfinite)
    add_test(NAME faults_train_${case}
             COMMAND ${MDTP_FAULTS_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_stop.py --mdtp $<TARGET_FILE:mdtp>
                     --mpiexec ${MPIEXEC_EXECUTABLE} ${case})
    set_tests_properties(faults_train_${case} PROPERTIES LABELS "faults;mpi" TIMEOUT 240)
  endforeach()
endif()
