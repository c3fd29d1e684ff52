#!/usr/bin/env bash
# `mdtp train --device cuda` against `mdtp train --device host` on the same run spec: every TP mode,
# ZeRO 1-3 (stage 2 with offload), pipelines (1F1B, ZB-H1 with ZeRO-3), one step from the same
# initialisation.  The first step's reduced gradients (--dump-grads) and the parameters after the
# step (--save) must agree per tensor within ||d||inf/||ref||inf <= 1e-5 in f32 (TF32 off, the
# default), and within 2e-2 under bf16 mixed precision (every TP mode, ZeRO 3, offload, 1F1B).  Then a checkpoint written on the device and resumed there must give the parameters and
# AdamW moments of the uninterrupted run bit for bit.
#
#   train_parity.sh MDTP MPIEXEC [WORK_DIR]
#
# Ranks share one GPU through the staged MPI communicator (MDTP_COMM=mpi), so one GPU runs all of
# it; a one-rank run uses NCCL.  Exit 77 (ctest: skipped) where no NVIDIA driver is installed, as
# the GPU test binaries do; PARITY_DEVICE=host runs the second half on the host too (a check of
# this script without a GPU).  Needs a python3 with h5py and numpy (PYTHON selects one).
set -uo pipefail
mdtp="$1"
mpiexec="$2"
work="${3:-$(mktemp -d /tmp/mdtp-parity.XXXXXX)}"
here="$(cd "$(dirname "$0")" && pwd)"
compare="$here/compare_h5.py"
device="${PARITY_DEVICE:-cuda}"
# A python3 with h5py and numpy: PYTHON, else python3, else Debian's.
for python in "${PYTHON:-}" python3 /usr/bin/python3; do
  [ -n "$python" ] && "$python" -c 'import h5py, numpy' 2>/dev/null && break
done

if [ "$device" = cuda ] && [ ! -e /dev/nvidiactl ] && [ ! -e /dev/dxg ]; then
  echo "SKIPPED: no GPU available (no NVIDIA driver: /dev/nvidiactl is absent)"
  exit 77
fi
"$python" -c 'import h5py, numpy' || { echo "FAILED: no python3 with h5py and numpy (set PYTHON)"; exit 1; }

# SGD with lr 1: the step's update is as large as the parameters, so their parity is the update's.
# (AdamW's first step is lr·g/(|g|+eps): it turns rounding noise in a gradient that is zero in exact
# arithmetic, such as the key bias's, into a full ±lr step.  The AdamW kernel is held to the host's
# in gpu_backend; the resumed run below trains with AdamW.)
small=(--layers 2 --hidden 64 --heads 4 --seq 32 --vocab 96 --global-batch 8)
# Mixed precision (bf16 parameters and activations, f32 gradients and master weights): host and
# device GEMMs both multiply the bf16 values exactly and accumulate in f32, in different orders, so
# an output can round to the neighbouring bf16 (2^-8 = 3.9e-3 relative) and carry that on; the
# tolerance is five such steps.
tol_f32=1e-5
tol_bf16=2e-2

failed=0
runs=0
while read -r ranks label args; do
  [ -z "$ranks" ] && continue
  runs=$((runs + 1))
  dir="$work/$label"
  mkdir -p "$dir"
  comm=mpi
  [ "$ranks" -eq 1 ] && comm=nccl
  tol=$tol_f32
  case " $args " in
    *" --dtype bf16 "*) tol=$tol_bf16 ;;
    *" --dtype "*) ;;
    *) args="$args --dtype f32" ;;
  esac
  # shellcheck disable=SC2086
  if ! "$mpiexec" -n "$ranks" "$mdtp" train "${small[@]}" --steps 1 --optimizer sgd --lr 1 $args --device host \
         --dump-grads "$dir/host-grads.h5" --save "$dir/host-params.h5" </dev/null >"$dir/host.log" 2>&1; then
    echo "$label: the host run failed:"; tail -5 "$dir/host.log"; failed=$((failed + 1)); continue
  fi
  # shellcheck disable=SC2086
  if ! MDTP_COMM=$comm "$mpiexec" -n "$ranks" "$mdtp" train "${small[@]}" --steps 1 --optimizer sgd --lr 1 $args \
         --device "$device" --dump-grads "$dir/dev-grads.h5" --save "$dir/dev-params.h5" </dev/null \
         >"$dir/dev.log" 2>&1; then
    echo "$label: the $device run failed ($comm):"; tail -5 "$dir/dev.log"; failed=$((failed + 1)); continue
  fi
  # The run's own audit: ledger = plan and memory = model on the device too.
  grep -E '^activations:' "$dir/dev.log" | sed "s/^/$label $device: /"
  grep -qE '^activations:.*NOT equal' "$dir/dev.log" && { echo "$label: memory differs across ranks"; failed=$((failed + 1)); }
  "$python" "$compare" --label "$label grads" --tol "$tol" "$dir/host-grads.h5" "$dir/dev-grads.h5" || failed=$((failed + 1))
  "$python" "$compare" --label "$label params" --tol "$tol" "$dir/host-params.h5" "$dir/dev-params.h5" || failed=$((failed + 1))
done <<'EOF'
1 none --tp-mode none
2 1d --tp-mode 1d --tp 2
2 1d-sp --tp-mode 1d-sp --tp 2
4 2d --tp-mode 2d --tp 4
8 2.5d --tp-mode 2.5d --tp 8 --tp-depth 2
8 3d --tp-mode 3d --tp 8
4 1d-dp2-zero1 --tp-mode 1d --tp 2 --zero 1
8 2d-dp2-zero3 --tp-mode 2d --tp 4 --zero 3
4 1d-dp2-zero2-offload --tp-mode 1d --tp 2 --zero 2 --zero-offload
4 1d-pp2-1f1b --tp-mode 1d --tp 2 --pp 2 --schedule 1f1b --micro-batches 4
8 1d-pp2-dp2-zbh1-zero3 --tp-mode 1d --tp 2 --pp 2 --schedule zb-h1 --micro-batches 4 --zero 3
1 bf16-none --tp-mode none --dtype bf16
2 bf16-1d-sp --tp-mode 1d-sp --tp 2 --dtype bf16
8 bf16-2d-dp2-zero3 --tp-mode 2d --tp 4 --zero 3 --dtype bf16
8 bf16-2.5d --tp-mode 2.5d --tp 8 --tp-depth 2 --dtype bf16
8 bf16-3d --tp-mode 3d --tp 8 --dtype bf16
4 bf16-1d-dp2-zero2-offload --tp-mode 1d --tp 2 --zero 2 --zero-offload --dtype bf16
4 bf16-1d-pp2-1f1b --tp-mode 1d --tp 2 --pp 2 --schedule 1f1b --micro-batches 4 --dtype bf16
EOF

# A checkpoint written on the device and resumed there: 2 steps straight against 1 + save + resume 1.
resume=(--tp-mode 1d --tp 2 --zero 1 --dtype f32 --device "$device")
dir="$work/resume"
mkdir -p "$dir"
if MDTP_COMM=mpi "$mpiexec" -n 4 "$mdtp" train "${small[@]}" "${resume[@]}" --steps 2 --save "$dir/straight.h5" \
     </dev/null >"$dir/straight.log" 2>&1 &&
   MDTP_COMM=mpi "$mpiexec" -n 4 "$mdtp" train "${small[@]}" "${resume[@]}" --steps 1 --save "$dir/half.h5" \
     </dev/null >"$dir/half.log" 2>&1 &&
   MDTP_COMM=mpi "$mpiexec" -n 4 "$mdtp" train "${small[@]}" "${resume[@]}" --steps 1 --init-from "$dir/half.h5" \
     --save "$dir/resumed.h5" </dev/null >"$dir/resumed.log" 2>&1; then
  "$python" "$compare" --label "resume 1+1 vs 2 steps" --tol 0 "$dir/straight.h5" "$dir/resumed.h5" || failed=$((failed + 1))
else
  echo "resume: a run failed:"; tail -5 "$dir"/*.log; failed=$((failed + 1))
fi

echo "train parity: $runs specs and a resumed checkpoint, $failed failed comparisons or runs"
[ "$failed" -eq 0 ]
