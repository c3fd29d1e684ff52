#!/usr/bin/env python3
"""Compares the floating-point datasets of two HDF5 files (checkpoints, gradient dumps) tensor by
tensor: ||test - ref||inf / ||ref||inf for every dataset of the reference, which the other file
must also hold with the same shape.  Prints one line per dataset and the worst; exits 1 when any
error exceeds --tol or a dataset is missing or shaped differently.

    compare_h5.py [--tol 1e-5] [--label TEXT] REF.h5 TEST.h5
"""
import argparse
import sys

import h5py
import numpy as np


def float_datasets(path):
    found = {}

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset) and obj.dtype.kind == "f":
            found[name] = obj[()]

    with h5py.File(path, "r") as f:
        f.visititems(visit)
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ref")
    ap.add_argument("test")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    ref, test = float_datasets(a.ref), float_datasets(a.test)
    prefix = f"{a.label}: " if a.label else ""
    if not ref:
        print(f"{prefix}FAIL: '{a.ref}' holds no floating-point datasets")
        return 1
    worst, worst_name, bad = 0.0, "", []
    for name, r in sorted(ref.items()):
        if name not in test:
            bad.append(f"{name} missing from {a.test}")
            continue
        t = test[name]
        if t.shape != r.shape:
            bad.append(f"{name} shaped {t.shape}, expected {r.shape}")
            continue
        r64, t64 = r.astype(np.float64), t.astype(np.float64)
        scale = np.max(np.abs(r64)) if r64.size else 0.0
        diff = np.max(np.abs(t64 - r64)) if r64.size else 0.0
        err = diff / scale if scale > 0 else diff
        if not np.isfinite(err) or err > a.tol:
            bad.append(f"{name} {err:.3e} > {a.tol:g}")
        if not np.isfinite(err) or err > worst:
            worst, worst_name = err, name
    if not worst_name:
        worst_name = "every tensor equal"
    status = "FAIL" if bad else "ok"
    print(f"{prefix}{status}: {len(ref)} tensors, worst ||d||inf/||ref||inf = {worst:.3e} ({worst_name}), "
          f"tolerance {a.tol:g}")
    for line in bad[:10]:
        print(f"{prefix}  {line}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
