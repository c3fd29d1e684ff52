# The pure plans (src/plan): stage partitions and pipeline schedules against the rules of
# docs/theory.md §3, and the whole-pipeline simulator (completion, FIFO channel order, bubbles,
# peak contexts).  One rank: nothing here communicates.
mdtp_add_mpi_test(plan SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_stage_partition.cpp ${CMAKE_CURRENT_LIST_DIR}/test_schedules.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_zb_v_order.cpp
                  RANKS 1 LABELS plan LIBS mdtp_plan)
# The ZB-V order is pinned to the reference's output in tests/data/zb_v_unit_orders.json.
target_compile_definitions(test_plan PRIVATE MDTP_TEST_DATA_DIR="${CMAKE_SOURCE_DIR}/tests/data")
