# The trainer with the ZeRO engine (mdtp train --zero): every stage, with offload, under TP modes
# and a pipeline, against stage 0 on the same mesh; memory per category against the bucket plan;
# checkpoints written under one stage, dp and pp resumed under others.  Activation recomputation
# (--recompute full) against none.  Rank counts: 2, 4 and 8.
mdtp_add_mpi_test(train_zero SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_train_zero.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_train_recompute.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/../model/gpt_harness.cpp ${CMAKE_CURRENT_LIST_DIR}/../tp/tp_harness.cpp
                  RANKS 2 4 8 LABELS zero train TIMEOUT 600)
