#!/usr/bin/env bash
# All of mdtp's GPU checks in one command, for a GPU machine held for a few minutes:
#
#   benchmarks/gpu/run_all.sh [--build-dir DIR] [--bundle FILE.tar.xz] [--out DIR] [--arch ARCH]
#
#   --build-dir DIR   the CUDA build to use or make (default build-cuda)
#   --bundle FILE     a build packed by benchmarks/gpu/bundle.sh on another machine: unpacked into
#                     DIR, its libraries and MPICH launcher used (for a GPU machine without mdtp's
#                     dependencies and without network); otherwise DIR is built here unless it
#                     already holds the programs
#   --arch ARCH       CMAKE_CUDA_ARCHITECTURES when building (default: native)
#   --only A,B,...    run only these stages (names as in the stage table: facts, gemm_bf16, gemm_f32,
#                     gpt_medium_tf32, gpt_medium_bf16, torch_gpt_medium_bf16,
#                     torch_gpt_medium_bf16_sdpa, gpt_xl_bf16, gpt_2p7b_bf16, gpt_h4096_bf16,
#                     torch_gpt_2p7b_bf16, torch_gpt_h4096_bf16, kernels_medium_bf16,
#                     kernels_h4096_bf16, gpt_small_f32, train_parity,
#                     train_cuda_timed, train_cuda_timed_bf16, ctest_gpu, kernel_profile,
#                     gemm_sweep_bf16, gemm_tf32, gpt_xl_tf32)
#   --ctest-exclude R leave the tests matching the regex R out of ctest_gpu (those an earlier call ran)
#   --deadline S      stop starting stages S seconds after the start (default 540), and shorten a
#                     stage's limit to what is left: the results are collected in any case
#   PARITY_DEVICE=host (environment) runs the train-parity stage host against host: a check of this
#                     script on a machine without a GPU (tests/gpu/train_parity.sh)
#   --out DIR         where the results go (default results/gpu): all.log (every stage's output,
#                     written as it runs), summary.md, gpu_results.h5, stage-logs.tar.gz and, from
#                     kernel_profile, kernels.csv (every kernel's duration, as ncu wrote it)
#
# Stages, each under its own time limit so that one hang costs one stage: the machine's facts,
# the build, `ctest -L gpu` (first: the tests hold every kernel to the host), `mdtp train` on the
# device against the host run of the same spec (every TP mode, ZeRO, pipelines, a resumed
# checkpoint), GEMM through the backend against bare cuBLAS, GPT training steps with their MFU
# beside PyTorch, and the streaming kernels against a bare device copy.  One GPU is enough; what
# needs two or more (NCCL between ranks, bus bandwidth) is reported as such.  Exit status: 0 when
# every stage passed.
set -uo pipefail
cd "$(dirname "$0")/../.."
repo="$PWD"

build_dir=build-cuda
bundle=""
arch=native
deadline=500
only=""
ctest_exclude=""
out="${OUT:-results/gpu}"
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --bundle) bundle="$2"; shift 2 ;;
    --arch) arch="$2"; shift 2 ;;
    --deadline) deadline="$2"; shift 2 ;;
    --only) only=",$2,"; shift 2 ;;
    --ctest-exclude) ctest_exclude="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "run_all.sh: unknown option '$1' (expected --build-dir, --bundle, --arch, --only, --ctest-exclude, --deadline or --out)" >&2
       exit 2 ;;
  esac
done
mkdir -p "$out"
out="$(cd "$out" && pwd)"
work="$(mktemp -d /tmp/mdtp-gpu.XXXXXX)"
logs="$work/logs"
mkdir -p "$logs"
all_log="$out/all.log"
: >"$all_log"
stages="$work/stages.tsv"
printf 'stage\tstatus\tseconds\n' >"$stages"

say() { echo "$*" | tee -a "$all_log"; }

# stage NAME SECONDS COMMAND...: runs COMMAND under a time limit, its output into the stage's log
# and all.log as it comes; records pass, fail or timeout.
stage() {
  local name="$1" limit="$2"; shift 2
  if [ -n "$only" ] && [[ "$only" != *",$name,"* ]]; then return 0; fi
  local left=$((deadline - SECONDS - 20))
  if [ "$left" -lt 15 ]; then
    printf '%s\t%s\t%d\n' "$name" "not run (deadline)" 0 >>"$stages"
    say "=== stage $name: not run, the deadline is near"
    return 0
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  say "=== stage $name (limit ${limit}s): $*"
  local t0=$SECONDS rc
  # A shell function of this script runs in a child bash, which `timeout` can start.
  if [ "$(type -t "$1")" = function ]; then set -- bash -c "$1"; fi
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$logs/$name.log" >>"$all_log"
  rc=${PIPESTATUS[0]}
  local status=pass
  [ "$rc" -ne 0 ] && status="fail(rc=$rc)"
  [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && status=timeout
  printf '%s\t%s\t%d\n' "$name" "$status" $((SECONDS - t0)) >>"$stages"
  say "=== stage $name: $status after $((SECONDS - t0)) s"
  return 0
}

# ---- the programs: unpacked from a bundle, built here, or already there --------------------------
if [ -n "$bundle" ]; then
  tar -C "$work" -xJf "$bundle"
  b="$work/bundle"
  # The CTest files name the build folder and the launcher by the paths of the machine that built
  # them: make those paths exist here (this needs root, as on a lent machine).
  built_at="$(cat "$b/build-path")"
  mkdir -p "$(dirname "$built_at")" "$(dirname "$repo")"
  if [ "$built_at" != "$repo/$build_dir" ] && [ ! -e "$built_at" ]; then
    cp -r "$b/build" "$built_at"
    # The test programs find the sources' data (corpus, cluster presets) by the build machine's path.
    src_at="$(dirname "$built_at")"
    [ -e "$src_at/data" ] || ln -s "$repo/data" "$src_at/data"
    # ctest's gpu_train_parity runs tests/gpu/train_parity.sh by its source path.
    [ -e "$src_at/tests" ] || ln -s "$repo/tests" "$src_at/tests"
  fi
  rm -rf "$build_dir" && cp -r "$b/build" "$build_dir"
  launcher="$(cat "$b/mpiexec-path")"
  if [ ! -x "$launcher" ]; then
    mkdir -p "$(dirname "$launcher")"
    cp "$b/bin/mpiexec.hydra" "$launcher"
    cp "$b/bin/hydra_pmi_proxy" "$(dirname "$launcher")/"
  fi
  export LD_LIBRARY_PATH="$b/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export UCX_MODULE_DIR="$b/lib/ucx" UCX_WARN_UNUSED_ENV_VARS=n
  # The machine's C++ runtime unless it is older than the one the programs were linked against.
  if ! ldd "$build_dir/mdtp" 2>&1 | grep -q 'GLIBCXX.*not found'; then :; else
    export LD_LIBRARY_PATH="$b/lib-cxx:$LD_LIBRARY_PATH"
  fi
  # cuBLAS, the CUDA runtime and NCCL come from the machine: the toolkit or a Python wheel.
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
           $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, sub, "lib") for p in nvidia.__path__ for sub in os.listdir(p)))' 2>/dev/null); do
    [ -d "$d" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
  done
  mpiexec="$launcher"
else
  if [ ! -x "$build_dir/mdtp" ] || [ ! -x "$build_dir/tests/test_gpu_backend" ]; then
    stage build 900 bash -c "cmake -S . -B '$build_dir' -DCMAKE_BUILD_TYPE=Release -DMDTP_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES='$arch' >'$logs/configure.log' 2>&1 || { cat '$logs/configure.log'; exit 1; }; \
        cmake --build '$build_dir' -j '$(nproc)' --target mdtp_gpu_tests"
  fi
  mpiexec="$(cmake -LA -N "$build_dir" | sed -n 's/^MPIEXEC_EXECUTABLE:FILEPATH=//p')"
fi
# A Python with h5py and numpy (the comparisons and the results file): PYTHON, else python3, else the
# virtual environment GPU images often keep PyTorch in.
for candidate in "${PYTHON:-}" python3 /opt/torch/.venv/bin/python3; do
  if [ -n "$candidate" ] && "$candidate" -c 'import h5py, numpy' 2>/dev/null; then python="$candidate"; break; fi
done
python="${python:-python3}"
mdtp="$repo/$build_dir/mdtp"
tests="$repo/$build_dir/tests"
export repo work out mpiexec mdtp tests python

# ---- the machine --------------------------------------------------------------------------------
facts() {
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem,power.limit --format=csv
  nvidia-smi -L
  command -v nvcc >/dev/null && nvcc --version | tail -1
  ldd "$tests/test_gpu_backend" | grep -E 'cublas|cudart|nccl|mpich|hdf5|openblas'
  "$mpiexec" --version 2>&1 | head -3
  command -v ctest >/dev/null && ctest --version | head -1
  lscpu | grep -E 'Model name|^CPU\(s\)'
  echo "mdtp commit: $(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
}
export -f facts
stage facts 30 facts

# ---- the GPU tests first: they hold every kernel to the host (gpu_tp_layers_np1 alone takes about
# 150 s: 42 meshes of NCCL communicators).  ctest's gpu_train_parity is the train_parity stage's
# script on the same programs: left out here when that stage runs below.
if [ -z "$only" ] || [[ "$only" == *",train_parity,"* ]]; then
  ctest_exclude="^gpu_train_parity\$${ctest_exclude:+|$ctest_exclude}"
  say "ctest_gpu: gpu_train_parity left out, the train_parity stage runs it"
fi
ctest_skip=()
[ -n "$ctest_exclude" ] && ctest_skip=(-E "$ctest_exclude")
stage ctest_gpu 300 ctest --test-dir "$build_dir" -L gpu "${ctest_skip[@]}" --output-on-failure --timeout 240

# ---- mdtp train on the device against the host run of the same spec ------------------------------
# Every TP mode, ZeRO 1-3, offload, pipelines and a resumed checkpoint (tests/gpu/train_parity.sh,
# also the ctest entry gpu_train_parity).
stage train_parity 150 env PYTHON="$python" "$repo/tests/gpu/train_parity.sh" "$mdtp" "$mpiexec" "$work/train"

# mdtp train itself on the device (its report: ms per step, the ledger, memory against the model),
# on random tokens of GPT-2's vocabulary.
"$python" -c "
import h5py, numpy as np
rng = np.random.default_rng(7)
with h5py.File('$work/tokens.h5', 'w') as f:
    f.create_dataset('inputs', data=rng.integers(0, 50257, (64, 1024), dtype=np.int32))
    f.create_dataset('targets', data=rng.integers(0, 50257, (64, 1024), dtype=np.int32))
    f.attrs['vocab_size'] = np.int64(50304)
"
stage train_cuda_timed 60 "$mpiexec" -n 1 "$mdtp" train --device cuda --data "$work/tokens.h5" --layers 12 \
  --hidden 768 --heads 12 --seq 1024 --global-batch 8 --dtype f32 --steps 4 --out "$work/train-timed.h5"
stage train_cuda_timed_bf16 90 "$mpiexec" -n 1 "$mdtp" train --device cuda --data "$work/tokens.h5" --layers 24 \
  --hidden 1024 --heads 16 --seq 1024 --global-batch 8 --dtype bf16 --steps 5 --out "$work/train-timed-bf16.h5"


# ---- GEMM through CudaBackend against bare cuBLAS -----------------------------------------------
# Square 8192^3 (the peak), and the GEMMs of a GPT-2 XL-like block at 8 x 1024 tokens.
gemm_shapes=(--shape 8192x8192x8192 --shape 8192x4800x1600 --shape 8192x1600x6400 --shape 8192x6400x1600
             --shape 1600x1600x8192)
stage gemm_bf16 60 "$tests/bench_gemm_cuda" --dtype bf16 --iters 30 "${gemm_shapes[@]}"
stage gemm_f32 90 "$tests/bench_gemm_cuda" --dtype f32 --iters 10 "${gemm_shapes[@]}"


# ---- GPT training steps on one GPU: MFU ---------------------------------------------------------
# Every GPT run takes 8 sequences of 1024 tokens: mdtp's benchmark and PyTorch's peer on the GPU.
gpt=("$tests/bench_gpt_cuda" --seq 1024 --batch 8)
torch_gpt=("$python" "$repo/benchmarks/torch_gpt.py" --device cuda --dtype bf16 --seq 1024 --batch 8 --vocab 50304)
# GPT-2 medium and XL shapes at 8 x 1024 tokens (TF32 tensor cores: the model trains in f32
# storage; bf16 training needs the mixed-precision issue).  The peak is the SKU's dense TF32
# data-sheet figure and, beside it, the measured 8192^3 GEMM.
stage gpt_medium_tf32 90 "${gpt[@]}" --layers 24 --embd 1024 --heads 16 \
  --dtype tf32 --warmup 2 --reps 5
# Mixed precision (bf16 parameters and activations, f32 gradients and master weights): MFU against
# the bf16 peak, the figure the GPU issue asks for (>= 35 % of 989 TFLOP/s dense on an H100 SXM).
stage gpt_medium_bf16 90 "${gpt[@]}" --layers 24 --embd 1024 --heads 16 \
  --dtype bf16 --warmup 2 --reps 5
# The same model in PyTorch on the same GPU (the peer): bf16 autocast, AdamW, with attention written
# out as mdtp computes it (T x T scores) and with PyTorch's fused scaled_dot_product_attention.
stage torch_gpt_medium_bf16 60 "${torch_gpt[@]}" \
  --attention explicit --layers 24 --embd 1024 --heads 16 --steps 6
stage torch_gpt_medium_bf16_sdpa 60 "${torch_gpt[@]}" \
  --attention sdpa --layers 24 --embd 1024 --heads 16 --steps 6
stage gpt_xl_bf16 120 "${gpt[@]}" --layers 48 --embd 1600 --heads 25 \
  --dtype bf16 --warmup 1 --reps 3
# Larger layers, where the GEMMs weigh more against the streaming kernels: GPT-3 2.7B's shape
# (32 layers, hidden 2560, 32 heads) and GPT-3 6.7B's layer (hidden 4096, 32 heads) at 16 of its
# 32 layers, the most whose f32 master weights, moments and gradients leave room for 8 x 1024
# tokens' activations on one 141 GB GPU.  PyTorch on the same shapes, attention written out.
stage gpt_2p7b_bf16 120 "${gpt[@]}" --layers 32 --embd 2560 --heads 32 \
  --dtype bf16 --warmup 1 --reps 3
stage gpt_h4096_bf16 120 "${gpt[@]}" --layers 16 --embd 4096 --heads 32 \
  --dtype bf16 --warmup 1 --reps 3
stage torch_gpt_2p7b_bf16 90 "${torch_gpt[@]}" \
  --attention explicit --layers 32 --embd 2560 --heads 32 --steps 4
stage torch_gpt_h4096_bf16 90 "${torch_gpt[@]}" \
  --attention explicit --layers 16 --embd 4096 --heads 32 --steps 4
# The streaming kernels alone against a bare device copy of the same bytes (bench_kernels_cuda), at
# GPT-2 medium's layer and at the hidden-4096 layer.
stage kernels_medium_bf16 60 "$tests/bench_kernels_cuda" --dtype bf16 --hidden 1024 --heads 16 --iters 20
stage kernels_h4096_bf16 60 "$tests/bench_kernels_cuda" --dtype bf16 --hidden 4096 --heads 32 --iters 10
stage gpt_small_f32 90 "${gpt[@]}" --layers 12 --embd 768 --heads 12 \
  --dtype f32 --warmup 1 --reps 3

# ---- where a bf16 step's GPU time goes, kernel by kernel (Nsight Compute, where the machine has it):
# two layers of GPT-2 medium's shape, two steps (one warm-up), every kernel's duration.
kernel_profile() {
  local ncu
  ncu="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)"
  [ -n "$ncu" ] || { echo "kernel_profile: no ncu on this machine"; return 1; }
  "$mpiexec" -n 1 "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv \
    "$tests/bench_gpt_cuda" --layers 2 --embd 1024 --heads 16 --seq 1024 --batch 8 --dtype bf16 --warmup 1 \
    --reps 1 --peak-tflops 989 >"$out/kernels.csv" 2>"$work/ncu.err" || { tail -20 "$work/ncu.err"; return 1; }
  "$python" "$repo/benchmarks/gpu/kernel_breakdown.py" "$out/kernels.csv" --steps 2
}
export -f kernel_profile
stage kernel_profile 150 kernel_profile

# ---- bf16 GEMM rates across a transformer layer's shapes (the data a per-kernel GEMM model is held to):
# 8192 tokens; QKV, attention projection, MLP up and down for hidden sizes 1024..8192 split over
# tp = 1, 2, 4, 8 (N or K divided), awkward sizes included (1600/8 = 200).
sweep=()
for h in 1024 1600 2048 4096 5120 8192; do
  for tp in 1 2 4 8; do
    sweep+=(--shape "8192x$((3 * h / tp))x$h" --shape "8192x${h}x$((h / tp))"
            --shape "8192x$((4 * h / tp))x$h" --shape "8192x${h}x$((4 * h / tp))")
  done
done
stage gemm_sweep_bf16 90 "$tests/bench_gemm_cuda" --dtype bf16 --iters 10 "${sweep[@]}"

# ---- last, if time is left: TF32 GEMMs and GPT-2 XL (1.5B parameters, about 100 GB in f32) ---------
stage gemm_tf32 60 "$tests/bench_gemm_cuda" --dtype tf32 --iters 20 "${gemm_shapes[@]}"
stage gpt_xl_tf32 150 "${gpt[@]}" --layers 48 --embd 1600 --heads 25 \
  --dtype tf32 --warmup 1 --reps 3

# ---- what needs two or more GPUs ---------------------------------------------------------------
ngpu="$(nvidia-smi -L | wc -l)"
if [ "$ngpu" -lt 2 ]; then
  say "needs >= 2 GPUs (this machine has $ngpu): NCCL between ranks (gpu_comm at 2 and 4 ranks over NCCL," \
      "gpu_tp_layers/gpu_gpt over NCCL), collective bus bandwidth against nccl-tests"
fi

# ---- results ------------------------------------------------------------------------------------
cp "$stages" "$out/stages.tsv"
"$python" "$repo/benchmarks/gpu/collect.py" --logs "$logs" --stages "$stages" --out "$out" 2>&1 | tee -a "$all_log"
tar -C "$work" --exclude="*.h5" -czf "$out/stage-logs.tar.gz" logs train 2>/dev/null || tar -C "$work" -czf "$out/stage-logs.tar.gz" logs
say "=== stages"
tee -a "$all_log" <"$stages"
! grep -qv -P '\tpass\t|^stage\t' "$stages"
