# The GPT model and its trainer (src/model): every mode against the serial model, which is checked
# against an independent reference and finite differences; optimizers, checkpoints and token data
# through mdtp::train.  Rank counts: 1 2 4 8 (all modes with q = 2 and several dp sizes), 18
# (2.5D q=3 d=2, 2D q=3 with dp=2) and 27 (3D q=3: label 'large').
mdtp_add_mpi_test(model SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gpt_model.cpp ${CMAKE_CURRENT_LIST_DIR}/test_training.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_train_errors.cpp ${CMAKE_CURRENT_LIST_DIR}/test_train_ops.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_model_chunks.cpp
                  RANKS 1 2 4 8 18 27 LABELS model TIMEOUT 900)

# `mdtp train --device cuda` in a host-only build is refused with a clear message on every rank.
if(NOT MDTP_CUDA)
  add_test(NAME train_device_cuda_refused_np2
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 $<TARGET_FILE:mdtp> train --tp-mode 1d --tp 2
                   --steps 1 --device cuda)
  set_tests_properties(train_device_cuda_refused_np2 PROPERTIES LABELS "model;mpi" TIMEOUT 120
                       PASS_REGULAR_EXPRESSION "--device cuda needs mdtp built with CUDA")
endif()
