#!/usr/bin/env bash
# Packs a built CUDA variant of mdtp so that it runs on a GPU machine that has the NVIDIA driver,
# CUDA 13 and NCCL but none of mdtp's other dependencies (MPICH, HDF5, OpenBLAS, fmt, ...): a lent
# GPU machine without network access, say.  benchmarks/gpu/run_all.sh --bundle FILE unpacks it.
#
#   benchmarks/gpu/bundle.sh [BUILD_DIR (default build-cuda)] [OUT.tar.xz (default BUILD_DIR.tar.xz)]
#
# What goes in: the GPU test and benchmark binaries, the `mdtp` program, the CTest files of the
# build (so `ctest -L gpu` runs there), MPICH's launcher (mpiexec.hydra and hydra_pmi_proxy), and
# every shared library those programs load except the ones the GPU machine must provide itself:
# the C library, the NVIDIA driver, the CUDA runtime and cuBLAS, and NCCL (a copy built for another
# driver would be wrong there).  The C++ runtime goes in a separate folder that run_all.sh uses only
# where the machine's own is older than the one the programs were linked against.
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build-cuda}"
out="${2:-$build.tar.xz}"
[ -x "$build/mdtp" ] || { echo "bundle.sh: '$build/mdtp' not found; build the CUDA variant first" >&2; exit 2; }

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
root="$stage/bundle"
mkdir -p "$root/lib" "$root/lib-cxx" "$root/bin"

# The build tree's programs and CTest files keep their paths relative to the build folder.
programs=("$build/mdtp")
while IFS= read -r f; do programs+=("$f"); done < <(find "$build/tests" -maxdepth 1 -type f -perm -u+x \
                                                        \( -name 'test_gpu_*' -o -name 'bench_*_cuda' \))
for p in "${programs[@]}"; do
  mkdir -p "$root/build/$(dirname "${p#"$build"/}")"
  cp "$p" "$root/build/${p#"$build"/}"
  strip --strip-unneeded "$root/build/${p#"$build"/}"
done
(cd "$build" && find . -name CTestTestfile.cmake -print0 | xargs -0 -I{} cp --parents {} "$root/build/")

mpiexec="$(cmake -LA -N "$build" | sed -n 's/^MPIEXEC_EXECUTABLE:FILEPATH=//p')"
mpiexec="$(readlink -f "$mpiexec")"
cp "$mpiexec" "$root/bin/mpiexec.hydra"
cp "$(dirname "$mpiexec")/hydra_pmi_proxy" "$root/bin/"
echo "$(cmake -LA -N "$build" | sed -n 's/^MPIEXEC_EXECUTABLE:FILEPATH=//p')" > "$root/mpiexec-path"
readlink -f "$build" > "$root/build-path"

# The shared libraries the programs and the launcher load, minus those the GPU machine provides.
provided='^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libutil|libresolv|libcuda|libcudart|libcublas|libcublasLt|libnccl|libnvidia-.*)\.so'
for p in "${programs[@]}" "$root/bin/mpiexec.hydra" "$root/bin/hydra_pmi_proxy"; do
  ldd "$p" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ "$name" =~ $provided ]]; then continue; fi
  case "$name" in
    libstdc++.so.*|libgcc_s.so.*) cp -L "$path" "$root/lib-cxx/$name" ;;
    *) cp -L "$path" "$root/lib/$name" ;;
  esac
done
# UCX (MPICH's ch4:ucx netmod) loads some transports at run time: cross-memory attach is the one a
# single node uses beside the shared-memory transports built into libuct.
for module in /usr/lib/x86_64-linux-gnu/ucx/libuct_cma.so.0; do
  [ -e "$module" ] && mkdir -p "$root/lib/ucx" && cp -L "$module" "$root/lib/ucx/" || true
done

tar -C "$stage" -cJf "$out" bundle
echo "bundle.sh: wrote $out ($(du -h "$out" | cut -f1)): ${#programs[@]} programs, $(ls "$root/lib" | wc -l) libraries"
