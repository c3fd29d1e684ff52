# The cost model: its collective plan against the ledger of the real layers on every mesh of the
# TP issue, its memory model against the MemoryTracker, and its formulas (time, ZeRO, pipeline,
# published table).  Shapes are tiny so the 18- and 27-rank runs stay quick.
mdtp_add_mpi_test(cost SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_plan_vs_ledger.cpp
                               ${CMAKE_CURRENT_LIST_DIR}/test_memory_model.cpp
                               ${CMAKE_CURRENT_LIST_DIR}/test_cost_formulas.cpp
                               ${CMAKE_SOURCE_DIR}/tests/tp/tp_harness.cpp
                  RANKS 1 2 4 8 9 18 27 LABELS cost LIBS mdtp_lib TIMEOUT 900)
target_include_directories(test_cost PRIVATE ${CMAKE_SOURCE_DIR}/tests/tp)
