#!/usr/bin/env python3
"""Where a training step's GPU time goes, kernel by kernel: reads the CSV that Nsight Compute writes
for `ncu --metrics gpu__time_duration.sum --csv` over bench_gpt_cuda (run_all.sh's kernel_profile
stage) and prints the time per kernel family per step, largest first, with the cuBLAS GEMMs as one
family and the kernel count beside each.

    kernel_breakdown.py KERNELS.csv --steps N

The families are the kernel's name without template arguments and parameters; every kernel that is
not one of mdtp's own (a cuBLAS/CUTLASS GEMM: names with gemm, nvjet, xmma, cutlass or sm90) is
summed as "cuBLAS GEMM".  Times are ncu's, kernels serialised one by one: launch gaps and overlap
are not in them, so the sum is below the step's wall time.
"""
import argparse
import csv
import re
import sys
from collections import defaultdict


def family(name):
    base = re.sub(r"\(anonymous namespace\)::|<unnamed>::", "", name)
    base = re.sub(r"\(.*$", "", base)            # parameters
    base = re.sub(r"<.*>", "", base).strip()       # template arguments
    words = base.split("::")[-1].split()
    base = words[-1] if words else name
    if re.search(r"gemm|nvjet|xmma|cutlass|sm90", name, re.I):
        return "cuBLAS GEMM"
    return base


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--steps", type=int, default=1, help="training steps the profile covers")
    a = ap.parse_args()
    with open(a.csv, newline="", errors="replace") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu's own messages are not CSV rows
    rows = list(csv.DictReader(lines))
    total = defaultdict(float)
    count = defaultdict(int)
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "ns")
        ns = value * {"ns": 1, "nsecond": 1, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6}.get(unit, 1)
        k = family(r["Kernel Name"])
        total[k] += ns
        count[k] += 1
    if not total:
        print("kernel_breakdown.py: no gpu__time_duration.sum rows in", a.csv)
        return 1
    whole = sum(total.values())
    print(f"kernel time per step: {whole / a.steps / 1e6:.2f} ms in {sum(count.values()) // a.steps} kernels "
          f"(ncu, serialised; {a.steps} step(s) profiled)")
    print(f"{'family':40s} {'ms/step':>9s} {'share':>7s} {'kernels/step':>13s}")
    for k, ns in sorted(total.items(), key=lambda kv: -kv[1]):
        print(f"{k:40s} {ns / a.steps / 1e6:9.3f} {100 * ns / whole:6.1f}% {count[k] / a.steps:13.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
