#!/usr/bin/env python3
"""The PyTorch peer of mdtp's host GEMM (mdtp_bench_host): torch.matmul of square bf16 (or f32)
matrices on a fixed number of CPU threads, best of several samples.  Prints the torch version, its
oneDNN status, then one line per size: `torch-matmul DTYPE N GFLOP/s` that run_host_bench.py reads.

    torch_matmul.py [--dtype bf16] [--sizes 512,1024,2048] [--threads 1] [--samples 5]

Thread variables are set before torch is imported (as torch_gpt.py does).  Exit status 3 without
torch.
"""
import argparse
import os
import sys
import time

p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
p.add_argument("--dtype", choices=("f32", "bf16"), default="bf16")
p.add_argument("--sizes", default="512,1024,2048")
p.add_argument("--threads", type=int, default=1)
p.add_argument("--samples", type=int, default=5)
args = p.parse_args()
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(args.threads)
try:
    import torch
except ImportError:
    print("torch: not installed for", sys.executable, "- the PyTorch comparison is skipped")
    sys.exit(3)

torch.set_num_threads(args.threads)
dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
native = "?"
try:
    native = str(bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()))
except (AttributeError, RuntimeError):
    pass
print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, oneDNN available "
      f"{torch.backends.mkldnn.is_available()}, enabled {torch.backends.mkldnn.enabled}, native bf16 {native}")
g = torch.Generator().manual_seed(0)
for n in (int(s) for s in args.sizes.split(",")):
    a = torch.randn(n, n, generator=g).to(dtype)
    b = torch.randn(n, n, generator=g).to(dtype)
    torch.matmul(a, b)  # warm-up
    best = float("inf")
    for _ in range(args.samples):
        t0 = time.perf_counter()
        torch.matmul(a, b)
        best = min(best, time.perf_counter() - t0)
    print(f"torch-matmul {args.dtype} {n} {2 * n ** 3 / best / 1e9:.1f}")
