#!/usr/bin/env bash
# mdtp quick start: sets up a fresh Debian machine, builds, and runs either the main experiment
# (default) or the whole test suite.
#
#   ./quickstart.sh          # install deps, build, run the main job (8-rank TP mode comparison)
#   ./quickstart.sh test     # install deps, build, run every test (ctest)
#   ./quickstart.sh simulate # also SimGrid: the SMPI build, every TP mode on 64 simulated H100s
#
# Environment: BUILD_DIR (default build), JOBS (default: all cores), MDTP_NATIVE=OFF for portable
# binaries, MDTP_CUDA_BUILD=0 to skip compiling the CUDA variant in `test` when nvcc is present,
# MDTP_SANITIZER_TESTS=0 to skip the AddressSanitizer/UBSan pass in `test`, MDTP_SIMULATE_TESTS=0
# to skip SimGrid and the SMPI build in `test` (the simulated-cluster test then checks only its
# refusals), MDTP_SKIP_APT=1 when the packages are already there.
set -euo pipefail
cd "$(dirname "$0")"

mode="${1:-main}"
case "$mode" in main|test|simulate) ;; *) echo "usage: $0 [main|test|simulate]" >&2; exit 2 ;; esac
BUILD_DIR="${BUILD_DIR:-build}"
JOBS="${JOBS:-$(nproc)}"

# libopenblas-dev: the host GEMM (cmake/MdtpBlas.cmake); libsleef-dev: vectorised exp/tanh/log in the
# host kernels (cmake/MdtpSleef.cmake).  Without either, mdtp still builds (Eigen GEMM, scalar libm).
packages=(build-essential cmake git pkg-config mpich libmpich-dev libeigen3-dev libhdf5-dev catch2
          libcli11-dev nlohmann-json3-dev libfmt-dev libopenblas-dev libsleef-dev
          python3 python3-h5py python3-numpy python3-matplotlib hdf5-tools)

install_packages() {
  [ "${MDTP_SKIP_APT:-0}" = 1 ] && return 0
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "== installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# configure_and_build DIR [TARGET] [cmake options...]
configure_and_build() {
  local dir="$1" target="$2"; shift 2
  echo "== configuring $dir"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DMDTP_NATIVE="${MDTP_NATIVE:-ON}" "$@" >"$dir.configure.log" 2>&1 \
    || { cat "$dir.configure.log"; exit 1; }
  echo "== building $dir (jobs: $JOBS)"
  cmake --build "$dir" -j "$JOBS" --target "$target"
}

# SimGrid for the SMPI build: `simulate`, and `test` unless MDTP_SIMULATE_TESTS=0.
simulated_tests=0
[ "$mode" = test ] && [ "${MDTP_SIMULATE_TESTS:-1}" = 1 ] && simulated_tests=1
# libtcmalloc-minimal4: the allocator `mdtp simulate` preloads into SimGrid (a third of its wall time).
{ [ "$mode" = simulate ] || [ "$simulated_tests" = 1 ]; } && packages+=(libsimgrid-dev libtcmalloc-minimal4)
install_packages
mkdir -p "$BUILD_DIR"
# The main job needs only the `mdtp` program; the tests need everything.
if [ "$mode" = test ]; then configure_and_build "$BUILD_DIR" all; else configure_and_build "$BUILD_DIR" mdtp; fi

# A downstream project against an installed mdtp: `cmake --install`, find_package(mdtp), the
# consumer's own experiment on 4 ranks; then the installed program run from elsewhere (it must
# find its shipped corpus under the prefix).
check_install() {
  local prefix="$PWD/${BUILD_DIR}-install" mpiexec
  mpiexec="$(cmake -LA -N "$BUILD_DIR" | sed -n 's/^MPIEXEC_EXECUTABLE:FILEPATH=//p')"
  echo "== installing into $prefix and building tests/consumer against it"
  rm -rf "$prefix" "${BUILD_DIR}-consumer"
  cmake --install "$BUILD_DIR" --prefix "$prefix" >"${BUILD_DIR}-install.log"
  cmake -S tests/consumer -B "${BUILD_DIR}-consumer" -DCMAKE_PREFIX_PATH="$prefix" >"${BUILD_DIR}-consumer.log" 2>&1 \
    || { cat "${BUILD_DIR}-consumer.log"; exit 1; }
  cmake --build "${BUILD_DIR}-consumer" -j "$JOBS"
  "$mpiexec" -n 4 "${BUILD_DIR}-consumer/consumer_experiment" </dev/null
  (cd /tmp && "$mpiexec" -n 1 "$prefix/bin/mdtp" train --steps 1 </dev/null | tail -n 1)
}

if [ "$mode" = test ]; then
  check_install
  # The CUDA variant is compiled and linked first (its GPU tests report "Skipped" with a visible
  # "no GPU" line where there is no GPU), so that the host suite's summary is the last word.
  if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
    if [ "${MDTP_CUDA_BUILD:-1}" = 1 ]; then
      export PATH="$PATH:/usr/local/cuda/bin"
      configure_and_build "${BUILD_DIR}-cuda" mdtp_gpu_tests -DMDTP_CUDA=ON
      echo "== GPU tests (skipped, and reported so, where no GPU is present)"
      (cd "${BUILD_DIR}-cuda" && ctest --output-on-failure -L gpu)
    fi
  else
    echo "== no CUDA toolkit found: the CUDA variant is not built"
  fi
  # AddressSanitizer + UBSan (Debug) over the core suites at up to 9 ranks; MPICH's own
  # allocations at exit are not ours, so leak detection is off.  MDTP_SANITIZER_TESTS=0 skips it.
  if [ "${MDTP_SANITIZER_TESTS:-1}" = 1 ]; then
    configure_and_build "${BUILD_DIR}-asan" mdtp_sanitizer_tests -DCMAKE_BUILD_TYPE=Debug -DMDTP_SANITIZE=ON
    echo "== AddressSanitizer + UBSan run (a subset of the suite)"
    (cd "${BUILD_DIR}-asan" && ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
       ctest --output-on-failure --timeout 900 \
       -R '^(core_np1|io_np1|comm_np[1-8]|mesh_mpi_np[148]|tp_layers_np[1-9]|tp2d_np[48]|tp3d_np8|cost_np[148]|model_np[12]|zero_np[24]|zero_parity_np2|faults_np[12]|safetensors_np1|hf_checkpoint_np4)$')
  fi
  # The SMPI variant (about 3 minutes on 2 cores): ctest's simulate_cli then runs every TP mode on
  # 64 simulated DGX H100 GPUs with a pipeline and ZeRO-3 (docs/simulate.md).
  [ "$simulated_tests" = 1 ] && configure_and_build "${BUILD_DIR}-smpi" mdtp -DMDTP_SMPI=ON
  echo "== running the test suite (label slow, the full matrices, left out: ctest -L slow runs them)"
  cd "$BUILD_DIR"
  exec ctest --output-on-failure --timeout 900 -LE slow
fi

if [ "$mode" = simulate ]; then
  # The SMPI variant (docs/simulate.md): only the `mdtp` program, compiled with smpicxx.
  configure_and_build "${BUILD_DIR}-smpi" mdtp -DMDTP_SMPI=ON
  # The TP-mode study's small form (experiments/analysis/simulate_study.py): 1D, 2D, 2.5D and 3D on
  # 64 simulated DGX H100 GPUs with a 4-stage pipeline and ZeRO-3, beside the analytic model.
  # --sizes 64,256,1024 is the full study (docs/simulate.md: its wall time and memory here).
  study=results/simulate-study-$(date +%Y%m%d-%H%M%S).h5
  echo "== the TP-mode study on 64 simulated DGX H100 GPUs (pipeline 4, ZeRO-3): $study"
  # Debian's interpreter first: a pyenv/venv python3 earlier on PATH usually lacks h5py.
  python=/usr/bin/python3; [ -x "$python" ] || python=python3
  "$python" experiments/analysis/simulate_study.py --mdtp "$BUILD_DIR/mdtp" --sizes 64 --out "$study" \
    --plots "${study%.h5}"
  exit 0
fi

echo "== running the main job"
# `mdtp experiment` launches mpiexec itself: a short α-β calibration on 2 ranks (one per core), the
# 8-rank comparison of 1D, 1D-SP, 2D, 2.5D and 3D on a transformer MLP, then
# experiments/analysis/report.py.  Runs are appended to results/experiment.h5 (never overwritten);
# plots and summary.md go to results/experiment-report/.
exec "$BUILD_DIR/mdtp" experiment --ranks 8 --out results/experiment.h5 \
  --mpiexec "$(cmake -LA -N "$BUILD_DIR" | sed -n 's/^MPIEXEC_EXECUTABLE:FILEPATH=//p')"
