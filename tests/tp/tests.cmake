# The cross-mode correctness suite, and the layer interface pipelines and ZeRO build on
# (micro-batches in flight, backward-input and weight passes, parameters in external storage).
# Rank counts: 1 (serial), 2/4/8 (1D, 1D-SP, 2D, 2.5D, 3D q=2), 9 (2D q=3), 18 (2.5D q=3 d=2),
# 27 (3D q=3: label 'large').
mdtp_add_mpi_test(tp_layers SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tp_layers.cpp ${CMAKE_CURRENT_LIST_DIR}/test_microbatches.cpp
                  RANKS 1 2 4 8 9 18 27 LABELS tp TIMEOUT 900)
