# The cost model: its collective plan against the ledger of the real layers on every mesh of the
# TP issue (GPT-2's layers and Llama's: Linears without biases, RMSNorm, the SwiGLU MLP), its memory
# model against the MemoryTracker, and its formulas (time, ZeRO, pipeline, published table).
# Shapes are tiny so the 18- and 27-rank runs stay quick.
mdtp_add_mpi_test(cost SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_plan_vs_ledger.cpp
                               ${CMAKE_CURRENT_LIST_DIR}/test_memory_model.cpp
                               ${CMAKE_CURRENT_LIST_DIR}/test_cost_formulas.cpp
                  RANKS 1 2 4 8 9 18 27 LABELS cost LIBS mdtp_lib TIMEOUT 900)
target_include_directories(test_cost PRIVATE ${CMAKE_SOURCE_DIR}/tests/tp)

# The whole-step model (src/cost/step_model.hpp): clusters, kernel times (tiles, waves, rooflines), FLOP counts (GPT-2's and Llama's, against
# the released parameter totals), bubbles, Korthikanti's activations, recomputation (selective, and a streaming attention kernel), ZeRO-Offload, the planner and the Narayanan et al. 2021 validation.  Pure arithmetic: one rank.
mdtp_add_mpi_test(cost_step SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cluster.cpp
                                    ${CMAKE_CURRENT_LIST_DIR}/test_kernel_time.cpp
                                    ${CMAKE_CURRENT_LIST_DIR}/test_step_model.cpp
                                    ${CMAKE_CURRENT_LIST_DIR}/test_offload_model.cpp
                                    ${CMAKE_CURRENT_LIST_DIR}/test_planner.cpp
                                    ${CMAKE_CURRENT_LIST_DIR}/test_recompute_model.cpp
                                    ${CMAKE_CURRENT_LIST_DIR}/test_summa_pipeline.cpp
                                    ${CMAKE_CURRENT_LIST_DIR}/test_overlap_costs.cpp
                  RANKS 1 LABELS cost LIBS mdtp_lib TIMEOUT 600)

# `mdtp plan --json` and `mdtp cost --json`: one configuration (cost's GPT-step form), a search with
# that configuration's layout fixed, a ranked search, the validation table.
find_program(MDTP_PLAN_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(MDTP_PLAN_PYTHON)
  foreach(form one fixed search validate switches)
    add_test(NAME cost_plan_json_${form}
             COMMAND ${MDTP_PLAN_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_plan_json.py $<TARGET_FILE:mdtp> ${form})
    set_tests_properties(cost_plan_json_${form} PROPERTIES LABELS "cost;cli" TIMEOUT 600)
  endforeach()
endif()
