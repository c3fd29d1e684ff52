# The `mdtp` command line (experiments/cli), end to end through tests/cli/test_cli.py:
#  - `mdtp <command> --help` for every command: exit 0, its usage and its options (without mpiexec,
#    MPI commands included), and every command `mdtp --help` lists;
#  - `mdtp --version`: the version and the git commit;
#  - bad options (unknown option, bad integer, bad mode name, ...): exit 2 and one line
#    `mdtp <command>: error: ...` naming the option and the value; under mpiexec, that line on
#    every rank, exit 2, no hang;
#  - `mdtp mesh --json` and `mdtp cost --json` (and --zero-table, --pipeline, the GPT step) parse,
#    with their keys;
#  - the spellings the one set of run flags replaced (--embd, --batch, --microbatches, ...): exit 2
#    and one line naming the new flag.
find_program(MDTP_CLI_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(MDTP_CLI_PYTHON NAMES python3)
if(NOT MDTP_CLI_PYTHON)
  message(STATUS "mdtp: no python3: the cli tests are not registered")
  return()
endif()

set(_cli ${MDTP_CLI_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_cli.py --mdtp $<TARGET_FILE:mdtp>)
set(_cli_tests "")

# mdtp_cli_help(COMMAND OPTION...): `mdtp COMMAND --help` lists these options.
function(mdtp_cli_help command)
  add_test(NAME cli_help_${command} COMMAND ${_cli} help ${command} ${ARGN})
  set(_cli_tests ${_cli_tests} cli_help_${command} PARENT_SCOPE)
endfunction()

mdtp_cli_help(mesh --world --tp --pp --cp --order --tp-mode --tp-depth --ranks-per-node --json)
mdtp_cli_help(smoke --tp --pp --cp --order --tp-mode --tp-depth --ranks-per-node)
mdtp_cli_help(train --tp-mode --tp --tp-depth --dp --pp --schedule --micro-batches --chunks --pp-layers --group-size
              --layers --hidden --heads --vocab --seq --ffn-hidden --kv-heads --global-batch --micro-batch-size --steps
              --lr --optimizer --grad-clip --zero --zero-bucket-mb --zero-offload --zero-keep-params
              --zero-reduce-per-micro-batch --recompute --dtype --grad-reduce-dtype --dropout --seed --data --init-from
              --save --dump-grads --out --device --skip-nonfinite --sync-timing --config --write-config)
mdtp_cli_help(cost --tp-mode --tp --tp-depth --dp --pp --layer --micro-batch-size --seq --hidden --ffn-hidden --layers
              --dtype --keep-gathered-3d --ranks-per-node --dp-grad-sync --alpha-intra --beta-intra --alpha-inter
              --beta-inter --calibration --calibration-run --gemm-flops --mpich-allreduce --optimizer-bytes --zero-table
              --params --param-bytes --grad-bytes --pipeline --micro-batches --chunks --json --heads --vocab
              --global-batch --gpus --schedule --recompute --cluster --zero --zero-reduce-per-micro-batch
              --zero-keep-params --dropout --no-dp-overlap --p2p-overlap --streaming-attention --step-bytes --config
              --write-config)
mdtp_cli_help(plan --layers --hidden --heads --seq --vocab --global-batch --gpus --cluster --dtype --dropout --json
              --top --max-tp --max-micro-batch --modes --validate --tp-mode --tp --tp-depth --dp --pp --schedule
              --chunks --micro-batches --micro-batch-size --zero --zero-reduce-per-micro-batch --zero-keep-params
              --recompute --no-dp-overlap --p2p-overlap --streaming-attention --config --write-config --rank)
mdtp_cli_help(schedule --schedule --pp --micro-batches --chunks --group-size --json --config)
mdtp_cli_help(calibrate --tp --tp-mode --tp-depth --ranks-per-node --groups --ops --min-bytes --max-bytes --factor
              --warmup --iters --dtype --gemm-size --out --cluster-out --cluster-name --peak-flops --allow-oversubscribed)
mdtp_cli_help(bench --modes --layer --global-batch --seq --hidden --ffn-hidden --tp-depth --dtype --warmup --reps
              --calibration --out --ranks-per-node --keep-gathered-3d --no-check)
mdtp_cli_help(experiment --ranks --mpiexec --out --report --calibrate-ranks --calibrate-max-bytes --modes --layer
              --global-batch --seq --hidden --ffn-hidden --dtype --warmup --reps --train-steps --python --analysis)
add_test(NAME cli_help_all COMMAND ${_cli} help-all)
add_test(NAME cli_version COMMAND ${_cli} version ${PROJECT_VERSION})
# Every old spelling of a run flag (test_cli.py's RENAMED: train --embd, cost --mode, bench --depth, ...)
# refused by its command with one line `OLD: was renamed; use NEW`, exit 2.
add_test(NAME cli_renamed_flags COMMAND ${_cli} renamed-flags)
list(APPEND _cli_tests cli_help_all cli_version cli_renamed_flags)

# mdtp_cli_bad(NAME COMMAND TEXT ARGS...): `mdtp ARGS` is refused with one line holding TEXT.
function(mdtp_cli_bad name command text)
  add_test(NAME cli_bad_${name} COMMAND ${_cli} bad ${command} "${text}" -- ${ARGN})
  set(_cli_tests ${_cli_tests} cli_bad_${name} PARENT_SCOPE)
endfunction()

mdtp_cli_bad(unknown_command mdtp "unknown command 'meshy'" meshy --world 4)
mdtp_cli_bad(unknown_option mesh "unknown option '--wrld'; did you mean --world?" mesh --wrld 4)
mdtp_cli_bad(unknown_option_near train "unknown option '--micro-batchs'; did you mean --micro-batches?" train
             --micro-batchs 4)
mdtp_cli_bad(bad_integer mesh "--tp: needs a whole number; got 'two'" mesh --world 4 --tp two)
mdtp_cli_bad(fraction cost "--hidden: needs a whole number; got '1.5'" cost --tp-mode 1d --tp 2 --micro-batch-size 2
             --seq 4 --hidden 1.5)
mdtp_cli_bad(out_of_range mesh "--world: needs a whole number up to 2147483647; got '4294967296'" mesh --world 4294967296)
mdtp_cli_bad(bad_mode mesh "--tp-mode: unknown tensor-parallel mode '4d'" mesh --world 4 --tp-mode 4d)
mdtp_cli_bad(bad_mode_in_list bench "--modes: unknown tensor-parallel mode '2.5D'" bench --modes 1d,2.5D)
# Names the run flags parse (mode, dtype, schedule, recompute), refused like any bad value.
mdtp_cli_bad(bad_run_mode train "--tp-mode: unknown tensor-parallel mode '4d'" train --tp-mode 4d)
mdtp_cli_bad(bad_run_dtype cost "--dtype: unknown dtype 'q8'" cost --tp-mode 1d --tp 2 --micro-batch-size 2 --seq 4
             --hidden 8 --dtype q8)
mdtp_cli_bad(bad_run_schedule plan "--schedule: unknown pipeline schedule '2f2b'" plan --layers 2 --hidden 64 --heads 4
             --seq 32 --vocab 100 --global-batch 8 --gpus 8 --pp 2 --schedule 2f2b)
mdtp_cli_bad(bad_number cost "--alpha-intra: needs a finite number; got '1us'" cost --tp-mode 1d --tp 2
             --micro-batch-size 2 --seq 4 --hidden 8 --alpha-intra 1us)
mdtp_cli_bad(bad_bytes calibrate "--max-bytes: needs a positive byte count like 4096, 64K or 16M; got '64Q'"
             calibrate --max-bytes 64Q)
mdtp_cli_bad(bad_choice train "--optimizer: expected one of sgd, adamw; got 'adam'" train --optimizer adam)
mdtp_cli_bad(negative_seed train "--seed: needs a whole number >= 0; got '-3'" train --seed -3)
mdtp_cli_bad(bad_nccl_algo cost "--nccl-algo: unknown NCCL algorithm 'collnet' in 'ring,collnet'; expected auto or a comma list of ring, tree, nvls, nvlstree" cost --nccl-algo ring,collnet)
mdtp_cli_bad(own_collectives_tree cost "--own-collectives runs every all-reduce as a ring; got --nccl-algo ring,tree"
             cost --own-collectives --nccl-algo ring,tree --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 64
             --global-batch 8)
mdtp_cli_bad(missing_value mesh "--tp: needs a value" mesh --world 4 --tp)
mdtp_cli_bad(missing_required mesh "--world is required" mesh --tp 2)
mdtp_cli_bad(positional smoke "unexpected argument 'now'" smoke now)
mdtp_cli_bad(bad_mesh mesh "2D tensor parallelism needs a square TP size; got tp=6" mesh --world 12 --tp 6 --tp-mode 2d)
# One configuration (cost's GPT-step form) that cannot run, and plan's search with the same axes
# fixed: nothing to rank, one line saying why.
mdtp_cli_bad(keep_params_below_zero3 cost "zero.keep_parameters needs ZeRO stage 3; got stage 2"
             cost --layers 4 --hidden 64 --heads 4 --seq 32 --vocab 100 --global-batch 8 --gpus 4 --tp-mode 1d --tp 2
             --zero 2 --zero-keep-params)
mdtp_cli_bad(plan_keep_params_below_zero3 plan "needs ZeRO stage 3"
             plan --layers 4 --hidden 64 --heads 4 --seq 32 --vocab 100 --global-batch 8 --gpus 4 --tp-mode 1d --tp 2
             --zero 2 --zero-keep-params)
mdtp_cli_bad(zb_h1_few_micro_batches cost "the zb-h1 schedule needs at least pp=2 micro-batches; got m=1"
             cost --layers 4 --hidden 64 --heads 4 --seq 32 --vocab 100 --global-batch 1 --gpus 4 --tp-mode 1d --tp 2
             --pp 2 --schedule zb-h1)
mdtp_cli_bad(plan_zb_h1_few_micro_batches plan "no configuration to rank: no schedule asked fits the layouts left"
             plan --layers 4 --hidden 64 --heads 4 --seq 32 --vocab 100 --global-batch 1 --gpus 4 --tp-mode 1d --tp 2
             --pp 2 --schedule zb-h1)
# Another form's option is refused by name, never dropped: the layer form's link and 3D options beside a GPT
# step, the GPT step's switches beside a layer; and ZeRO offload beside --engine-kernels (mdtp's engine's host
# path, which the step model does not price) or without a ZeRO stage.
mdtp_cli_bad(cost_step_layer_option cost "--keep-gathered-3d does not apply to a GPT step; it is the layer form's"
             cost --layers 4 --hidden 64 --heads 4 --seq 32 --vocab 100 --global-batch 8 --gpus 8 --tp-mode 3d --tp 8
             --micro-batch-size 8 --keep-gathered-3d)
mdtp_cli_bad(cost_step_calibration cost "--calibration does not apply to a GPT step; it is the layer form's"
             cost --layers 4 --hidden 64 --heads 4 --seq 32 --vocab 100 --global-batch 8 --calibration links.h5)
mdtp_cli_bad(cost_layer_step_option cost "--engine-kernels does not apply to the model of a layer; it is the GPT step's"
             cost --tp-mode 1d --tp 2 --micro-batch-size 2 --seq 4 --hidden 8 --engine-kernels)
mdtp_cli_bad(cost_step_offload_engine_kernels cost "zero.offload with --engine-kernels: the step model prices DeepSpeed"
             cost --layers 4 --hidden 64 --heads 4 --seq 32 --vocab 100 --global-batch 8 --gpus 4 --zero 1
             --zero-offload --engine-kernels)
mdtp_cli_bad(cost_step_offload_stage0 cost "zero.offload needs ZeRO stage 1, 2 or 3; got stage 0"
             cost --layers 4 --hidden 64 --heads 4 --seq 32 --vocab 100 --global-batch 8 --gpus 4 --zero-offload)
mdtp_cli_bad(plan_validate_switch plan "--engine-kernels does not apply to --validate: each table's rule and rows set"
             plan --validate --engine-kernels)
mdtp_cli_bad(plan_offload_stage0 plan "zero.offload needs ZeRO stage 1, 2 or 3; got stage 0"
             plan --layers 4 --hidden 64 --heads 4 --seq 32 --vocab 100 --global-batch 8 --gpus 4 --zero 0
             --zero-offload)
mdtp_cli_bad(plan_rank_without_write_config plan "--rank 2 picks the layout --write-config writes"
             plan --layers 4 --hidden 64 --heads 4 --seq 32 --vocab 100 --global-batch 8 --gpus 4 --rank 2)
mdtp_cli_bad(plan_offload_engine_kernels plan "zero.offload with --engine-kernels: the step model prices DeepSpeed"
             plan --layers 4 --hidden 64 --heads 4 --seq 32 --vocab 100 --global-batch 8 --gpus 4 --zero-offload
             --engine-kernels)

# Refused on every rank, before MPI starts (a bad value) and after (a mesh the world cannot hold).
add_test(NAME cli_mpi_bad_option_np2
         COMMAND ${_cli} --mpiexec ${MPIEXEC_EXECUTABLE} mpi-bad 2 bench "--reps: must be between 1 and 100000; got 0"
                 -- bench --reps 0)
add_test(NAME cli_mpi_bad_mesh_np2
         COMMAND ${_cli} --mpiexec ${MPIEXEC_EXECUTABLE} mpi-bad 2 train "world=2 is not divisible by tp*pp*cp=3"
                 -- train --tp-mode 1d --tp 3 --steps 1)
list(APPEND _cli_tests cli_mpi_bad_option_np2 cli_mpi_bad_mesh_np2)
# --help of an MPI command under mpiexec: printed once (rank 0), exit 0.
add_test(NAME cli_mpi_help_np2 COMMAND ${_cli} --mpiexec ${MPIEXEC_EXECUTABLE} mpi-help 2 smoke)
list(APPEND _cli_tests cli_mpi_help_np2)

# mdtp_cli_json(NAME KIND ARGS...): `mdtp ARGS` prints JSON with the keys of KIND.
function(mdtp_cli_json name kind)
  add_test(NAME cli_json_${name} COMMAND ${_cli} json ${kind} -- ${ARGN})
  set(_cli_tests ${_cli_tests} cli_json_${name} PARENT_SCOPE)
endfunction()

mdtp_cli_json(mesh mesh mesh --world 16 --tp 8 --pp 2 --tp-mode 2.5d --tp-depth 2 --json)
mdtp_cli_json(mesh_placed mesh mesh --world 16 --tp 2 --pp 4 --order tp-dp-pp --ranks-per-node 8 --json)
mdtp_cli_json(cost cost cost --tp-mode 2d --tp 4 --dp 2 --micro-batch-size 8 --seq 512 --hidden 1024 --ranks-per-node 4
              --json)
mdtp_cli_json(cost_3d cost cost --tp-mode 3d --tp 8 --dp 2 --micro-batch-size 2 --seq 16 --hidden 64 --layers 3
              --dp-grad-sync --json)
# The layer form on a cluster's data sheet: its links and its bf16 GEMM rate (without --cluster the
# default time model has no bf16 rate, and the refusal says where to get one).
mdtp_cli_json(cost_layer_cluster cost cost --tp-mode 1d --tp 8 --micro-batch-size 4 --seq 2048 --hidden 4096 --dtype bf16
              --cluster dgx-h100 --json)
mdtp_cli_bad(cost_layer_bf16_no_rate cost "no GEMM rate for dtype bf16; give --cluster" cost --tp-mode 1d --tp 2
             --micro-batch-size 2 --seq 4 --hidden 8 --dtype bf16)
mdtp_cli_json(cost_zero cost-zero cost --zero-table --params 7.5e9 --dp 64 --json)
mdtp_cli_json(cost_pipeline cost-pipeline cost --pipeline --pp 4 --micro-batches 8 --chunks 2 --json)
# The whole GPT step of one configuration (Narayanan et al.'s 1T row on DGX A100, bf16 with dropout).
mdtp_cli_json(cost_step cost-step cost --layers 128 --hidden 25600 --heads 160 --seq 2048 --vocab 51200 --global-batch
              3072 --micro-batch-size 1 --tp-mode 1d --tp 8 --pp 64 --gpus 3072 --schedule interleaved --chunks 2
              --recompute full --dtype bf16 --dropout 0.1 --cluster dgx-a100 --json)

set_tests_properties(${_cli_tests} PROPERTIES LABELS cli TIMEOUT 180)
set_tests_properties(cli_mpi_bad_option_np2 cli_mpi_bad_mesh_np2 cli_mpi_help_np2 PROPERTIES LABELS "cli;mpi")
# One file for a run (tests/cli/test_spec_roundtrip.py): `mdtp cost … --write-config r.json` then
# `mpiexec -n N mdtp train --config r.json`: the results file stores the same spec byte for byte,
# and the ledger of the last step equals cost's --step-bytes per (phase, group, op); plan's
# --write-config read back by cost --config.
add_test(NAME cli_spec_roundtrip
         COMMAND ${MDTP_CLI_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_spec_roundtrip.py --mdtp $<TARGET_FILE:mdtp>
                 --mpiexec ${MPIEXEC_EXECUTABLE})
set_tests_properties(cli_spec_roundtrip PROPERTIES LABELS "cli;train;cost" TIMEOUT 900 PROCESSORS 2)
# Docs that cannot go stale (tests/cli/test_docs_examples.py): every `mdtp` command in README.md and
# docs/*.md runs (exit 0, or the refusal the document shows); placeholders and GPU lines are
# listed as skipped; it prints how many examples it ran.
add_test(NAME cli_docs_examples
         COMMAND ${MDTP_CLI_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/test_docs_examples.py --mdtp $<TARGET_FILE:mdtp>
                 --mpiexec ${MPIEXEC_EXECUTABLE} --root ${CMAKE_SOURCE_DIR})
set_tests_properties(cli_docs_examples PROPERTIES LABELS "cli;docs" TIMEOUT 1500 PROCESSORS 2)
