# The pipeline engine (src/pipeline) under the trainer, label `pipeline`:
#  - pipeline_train: the pipelined run against the unpipelined one in f64 (losses, every
#    gradient, the gradient norm with the tied wte counted once, parameters after three AdamW
#    steps); CI runs a spread ([ci]: every schedule, every mode, pp 2/3/4, tp×pp×dp = 2×2×2,
#    uneven splits, 3D × pp 2 at 16 ranks), label `slow` the whole matrix ([full]) per world size;
#  - pipeline_traffic: the ledger's phase "pipeline" calls and bytes against the plan's
#    (cost::plan_step_comm), per rank and in the trainer's results table;
#  - pipeline_cli_*: `mdtp schedule` (table, JSON checked against the schedule rules, refusals)
#    and `mdtp train` refusing bad pipelines on every rank before any collective.

mdtp_add_mpi_test(pipeline_train SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_pipeline_train.cpp
                  RANKS 4 6 8 16 LABELS pipeline TIMEOUT 300 ARGS "[ci]")
target_include_directories(test_pipeline_train PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../model ${CMAKE_CURRENT_LIST_DIR}/..)
foreach(np 4 6 8 12 16)
  add_test(NAME pipeline_train_full_np${np}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
                   $<TARGET_FILE:test_pipeline_train> ${MPIEXEC_POSTFLAGS} "[full]")
  set_tests_properties(pipeline_train_full_np${np} PROPERTIES LABELS "mpi;pipeline;slow" TIMEOUT 7200 PROCESSORS 1)
endforeach()

mdtp_add_mpi_test(pipeline_traffic SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_pipeline_traffic.cpp
                  RANKS 4 8 16 LABELS pipeline TIMEOUT 300)
target_include_directories(test_pipeline_traffic PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../model ${CMAKE_CURRENT_LIST_DIR}/..)

find_program(MDTP_PIPELINE_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(MDTP_PIPELINE_PYTHON NAMES python3)
if(MDTP_PIPELINE_PYTHON)
  set(_sched ${MDTP_PIPELINE_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_schedule_cli.py --mdtp $<TARGET_FILE:mdtp>
             --mpiexec ${MPIEXEC_EXECUTABLE})
  add_test(NAME pipeline_cli_schedule COMMAND ${_sched} schedule)
  add_test(NAME pipeline_cli_refusals COMMAND ${_sched} --data ${CMAKE_SOURCE_DIR}/data/corpus.txt refusals)
  set_tests_properties(pipeline_cli_schedule pipeline_cli_refusals PROPERTIES LABELS "pipeline;cli" TIMEOUT 300)
endif()
