# The trainer with the ZeRO engine (mdtp train --zero): every stage, with offload, under TP modes
# and a pipeline, against stage 0 on the same mesh; memory per category against the bucket plan;
# checkpoints written under one stage, dp and pp resumed under others.  Activation recomputation
# (--recompute full) against none.  Rank counts: 2, 4 and 8.
mdtp_add_mpi_test(train_zero SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_train_zero.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_train_recompute.cpp
                  RANKS 2 4 8 LABELS zero train TIMEOUT 600)
# ZeRO over dp × depth in 2.5D (docs/zero.md §5): q = 1 meshes in CI, q = 2 d = 2 dp 2 (16 ranks) slow.
mdtp_add_mpi_test(zero_depth SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_zero_depth.cpp
                  RANKS 4 6 8 LABELS zero train TIMEOUT 300)
add_test(NAME zero_depth_slow_np16
         COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 16 ${MPIEXEC_PREFLAGS} $<TARGET_FILE:test_zero_depth>
                 ${MPIEXEC_POSTFLAGS})
set_tests_properties(zero_depth_slow_np16 PROPERTIES LABELS "mpi;zero;train;slow" TIMEOUT 900 PROCESSORS 1)
# ZeRO-3 builds, initialises and loads the model shard by shard (docs/zero.md §7): start-up and
# in-pass parameter peaks against the plan and the whole TP shard, bit-identity with stage 0 at
# step 0 and after a checkpoint load, f64 and f32.  Rank counts: 2, 4 and 8.
mdtp_add_mpi_test(train_zero3_shards SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_train_zero3_shards.cpp
                  RANKS 2 4 8 LABELS zero train memory checkpoint TIMEOUT 300)
# The trainer is a step loop (src/train/trainer.cpp): train() at most 60 lines, no function in
# src/train over 150, the trainer's file under 300 lines; the rest lives in the observers' files.
find_program(MDTP_SHAPE_PYTHON NAMES python3)
if(MDTP_SHAPE_PYTHON)
  add_test(NAME train_shape_check
           COMMAND ${MDTP_SHAPE_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/check_trainer_shape.py ${CMAKE_SOURCE_DIR}/src/train)
  set_tests_properties(train_shape_check PROPERTIES LABELS "train;layers")
endif()
# Mixed precision (bf16 parameters and activations, f32 gradients and masters) through mdtp train:
# every mode and a pipeline with ZeRO-3 against mode none at bf16 and the f64 serial run (per
# tensor ≤ 2e-2); checkpoints (f32 masters) resumed bitwise and across precisions.
mdtp_add_mpi_test(train_bf16 SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_train_bf16.cpp
                  RANKS 2 4 8 LABELS train checkpoint TIMEOUT 600)
# The f16 loss scaler against Megatron's DynamicGradScaler rules (no MPI traffic).
mdtp_add_mpi_test(loss_scaler SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_loss_scaler.cpp RANKS 1 LIBS mdtp_train LABELS train)
# bf16 and f16 (dynamic loss scaling) against f32 over 200 steps on the shipped corpus, 2 ranks:
# the mean of the last 20 losses within max(1 %, twice f32's seed-to-seed spread); the loss curves
# drawn by the report (loss_curves.png).
if(MDTP_ANALYSIS_PYTHON)
  add_test(NAME train_precision_convergence_np2
           COMMAND ${MDTP_ANALYSIS_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_precision_convergence.py --mdtp $<TARGET_FILE:mdtp>
                   --mpiexec ${MPIEXEC_EXECUTABLE} --report ${CMAKE_SOURCE_DIR}/experiments/analysis/report.py
                   --out ${CMAKE_BINARY_DIR}/test-precision-convergence --steps 200 --ranks 2)
  set_tests_properties(train_precision_convergence_np2 PROPERTIES LABELS "train;mpi" TIMEOUT 600)
endif()
# Hugging Face safetensors checkpoints through mdtp train (train/hf_checkpoint.hpp): saved equal to
# the HDF5 checkpoint (Conv1D weights transposed), reloaded bitwise under ZeRO-3 + pipeline and 2D,
# files written by numpy in the hub's shape and as index-linked shards giving the same first loss,
# and bad files, configs and --save targets refused in one line.  4 ranks.
mdtp_add_mpi_test(hf_checkpoint SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_hf_checkpoint.cpp
                  RANKS 4 LABELS train checkpoint TIMEOUT 300)
target_compile_definitions(test_hf_checkpoint PRIVATE MDTP_NUMPY_PYTHON="${MDTP_NUMPY_PYTHON}"
                           MDTP_HF_SCRIPT="${CMAKE_CURRENT_LIST_DIR}/write_hf_gpt2.py")
# The same with Hugging Face transformers itself (GPT2LMHeadModel, save_pretrained, shards, bf16,
# the bare GPT2Model): first losses equal to 1e-12 in f64.  Registered where a python3 imports
# torch, transformers and h5py (PyPI; not in CI): set MDTP_HF_PYTHON to one (a venv's python).
mdtp_find_python(MDTP_HF_PYTHON "torch, transformers, h5py" "python3 with torch, transformers, h5py (hf_transformers_interop)")
if(MDTP_HF_PYTHON)
  add_test(NAME hf_transformers_interop_np2
           COMMAND ${MDTP_HF_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/hf_transformers_interop.py --mdtp $<TARGET_FILE:mdtp>
                   --mpiexec ${MPIEXEC_EXECUTABLE})
  set_tests_properties(hf_transformers_interop_np2 PROPERTIES LABELS "train;checkpoint;interop" TIMEOUT 300
                       SKIP_RETURN_CODE 77 PROCESSORS 2)
  # Llama: LlamaForCausalLM.from_pretrained on mdtp's file (no missing/unexpected/mismatched key) and
  # mdtp on save_pretrained's (one file, shards, BF16), first losses equal in f64 with transformers'
  # float32 steps run in float64; and the numpy port of modeling_llama against transformers itself.
  add_test(NAME hf_llama_interop_np2
           COMMAND ${MDTP_HF_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/hf_llama_interop.py --mdtp $<TARGET_FILE:mdtp>
                   --mpiexec ${MPIEXEC_EXECUTABLE})
  add_test(NAME llama_numpy_port_vs_transformers
           COMMAND ${MDTP_HF_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/../model/llama_numpy_port.py)
  set_tests_properties(hf_llama_interop_np2 llama_numpy_port_vs_transformers PROPERTIES
                       LABELS "train;checkpoint;interop;llama" TIMEOUT 300 SKIP_RETURN_CODE 77 PROCESSORS 2)
else()
  message(STATUS "mdtp: no python3 with torch + transformers + h5py: hf_transformers_interop not registered "
                 "(-DMDTP_HF_PYTHON=/path/to/venv/bin/python3)")
endif()

# Llama and Hugging Face's LlamaForCausalLM state dict, without transformers: mdtp's safetensors
# and HDF5 checkpoints hold Hugging Face's keys (q/k/v_proj, gate/up_proj apart), their first losses
# equal an independent numpy port of modeling_llama (tests/model/llama_numpy_port.py) to 1e-12 in
# f64, numpy-written files (one, sharded, bare and tied) load, a save-load-save round trip keeps the
# bytes, and missing/extra/misshapen/integer tensors and unimplemented config fields are refused.
mdtp_find_python(MDTP_NUMPY_H5PY_PYTHON "numpy, h5py" "python3 with numpy and h5py (llama_interop)")
if(MDTP_NUMPY_H5PY_PYTHON)
  add_test(NAME llama_interop_np4
           COMMAND ${MDTP_NUMPY_H5PY_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/llama_interop.py --mdtp $<TARGET_FILE:mdtp>
                   --mpiexec ${MPIEXEC_EXECUTABLE})
  set_tests_properties(llama_interop_np4 PROPERTIES LABELS "train;checkpoint;interop;llama" TIMEOUT 300
                       SKIP_RETURN_CODE 77 PROCESSORS 2)
endif()
