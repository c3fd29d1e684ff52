# The GPT model and its trainer (src/model): every mode against the serial model, which is checked
# against an independent reference and finite differences; optimizers, checkpoints and token data
# through mdtp::train.  Rank counts: 1 2 4 8 (all modes with q = 2 and several dp sizes), 18
# (2.5D q=3 d=2, 2D q=3 with dp=2) and 27 (3D q=3: label 'large').
mdtp_add_mpi_test(model SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gpt_model.cpp ${CMAKE_CURRENT_LIST_DIR}/test_training.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_train_errors.cpp ${CMAKE_CURRENT_LIST_DIR}/test_train_ops.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_model_chunks.cpp ${CMAKE_CURRENT_LIST_DIR}/test_llama_model.cpp
                  RANKS 1 2 4 8 LABELS model TIMEOUT 900)
# At 18 and 27 ranks CI leaves out the refusal tests ([errors]: the same one-line errors as at 1-8
# ranks, a third of the time there); label `slow` runs everything.
foreach(np IN ITEMS 18 27)
  add_test(NAME model_np${np}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS} $<TARGET_FILE:test_model>
                   ${MPIEXEC_POSTFLAGS} "~[errors]")
  add_test(NAME model_full_np${np}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS} $<TARGET_FILE:test_model>
                   ${MPIEXEC_POSTFLAGS})
  set(large "")
  if(np EQUAL 27)
    set(large ";large")
  endif()
  set_tests_properties(model_np${np} PROPERTIES LABELS "mpi;model${large}" TIMEOUT 900 PROCESSORS 1)
  set_tests_properties(model_full_np${np} PROPERTIES LABELS "mpi;model;slow${large}" TIMEOUT 900 PROCESSORS 1)
endforeach()

# `mdtp train --device cuda` in a host-only build is refused with a clear message on every rank.
if(NOT MDTP_CUDA)
  add_test(NAME train_device_cuda_refused_np2
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 $<TARGET_FILE:mdtp> train --tp-mode 1d --tp 2
                   --steps 1 --device cuda)
  set_tests_properties(train_device_cuda_refused_np2 PROPERTIES LABELS "model;mpi" TIMEOUT 120
                       PASS_REGULAR_EXPRESSION "--device cuda needs mdtp built with CUDA")
endif()

# Llama, and the GPT-2 with an untied head, under the pipeline and ZeRO engines in every mode,
# through mdtp train (f64): first loss and every gradient against the serial run to 1e-12
# (tests/model/model_engines.py).
mdtp_find_python(MDTP_NUMPY_H5PY_PYTHON "numpy, h5py" "python3 with numpy and h5py (llama tests)")
if(MDTP_NUMPY_H5PY_PYTHON)
  add_test(NAME llama_engines_np8
           COMMAND ${MDTP_NUMPY_H5PY_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/model_engines.py --mdtp $<TARGET_FILE:mdtp>
                   --model llama --mpiexec ${MPIEXEC_EXECUTABLE})
  set_tests_properties(llama_engines_np8 PROPERTIES LABELS "model;pipeline;zero;llama" TIMEOUT 600
                       SKIP_RETURN_CODE 77 PROCESSORS 2)
  add_test(NAME gpt2_untied_engines_np8
           COMMAND ${MDTP_NUMPY_H5PY_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/model_engines.py --mdtp $<TARGET_FILE:mdtp>
                   --model gpt2 --mpiexec ${MPIEXEC_EXECUTABLE})
  set_tests_properties(gpt2_untied_engines_np8 PROPERTIES LABELS "model;pipeline;zero" TIMEOUT 600
                       SKIP_RETURN_CODE 77 PROCESSORS 2)
endif()
