#!/usr/bin/env python3
"""The same `mdtp train` command twice gives bitwise-identical results (issue 16).

Runs `mpiexec -n N mdtp train ARGS --save ckpt.h5 --dump-grads grads.h5 --out results.h5` twice,
each in its own directory, with one BLAS thread, and compares with h5py, bit for bit:
  - every dataset of the checkpoint (parameters and optimizer moments),
  - every dataset of the gradient dump and its step/loss attributes,
  - the loss and gradient-norm columns of the results file's steps table,
  - the losses printed on stdout.
HDF5 files themselves carry time stamps and the results file the run's times, so the files are
not compared byte for byte.

  test_determinism.py --mdtp BIN --mpiexec M --ranks N -- TRAIN_ARGS...
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile


def run(mpiexec, mdtp, ranks, args, d):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MDTP_BLAS_THREADS="1")
    command = [mpiexec, "-n", str(ranks), mdtp, "train", *args, "--save", "ckpt.h5", "--dump-grads", "grads.h5",
               "--out", "results.h5"]
    print("$", " ".join(command), flush=True)
    r = subprocess.run(command, cwd=d, capture_output=True, text=True, timeout=300, env=env)
    if r.returncode != 0:
        raise SystemExit(f"exit status {r.returncode}: {r.stderr[-3000:]}")
    return r.stdout


def datasets(path):
    import h5py
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                out[name] = obj[...]
        f.visititems(visit)
        attrs = {k: f.attrs[k] for k in f.attrs}
    return out, attrs


def same_bits(a, b):
    import numpy as np
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mdtp", required=True)
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    args = a.args[1:] if a.args[:1] == ["--"] else a.args
    import numpy as np

    dirs = [tempfile.mkdtemp(prefix=f"mdtp-determinism-{i}-") for i in range(2)]
    failures = []
    try:
        outputs = [run(a.mpiexec, a.mdtp, a.ranks, args, d) for d in dirs]
        losses = [re.findall(r"^step\s+(\d+)\s+loss\s+(\S+)\s+grad-norm\s+(\S+)", o, re.M) for o in outputs]
        if not losses[0]:
            failures.append("no step lines on stdout")
        if losses[0] != losses[1]:
            failures.append(f"printed losses differ: {losses[0]} vs {losses[1]}")

        for name in ("ckpt.h5", "grads.h5"):
            (da, aa), (db, ab) = (datasets(os.path.join(d, name)) for d in dirs)
            if sorted(da) != sorted(db):
                failures.append(f"{name}: different datasets")
            compared = 0
            for key in sorted(set(da) & set(db)):
                compared += 1
                if not same_bits(da[key], db[key]):
                    diff = np.max(np.abs(da[key].astype(np.float64) - db[key].astype(np.float64)))
                    failures.append(f"{name}: dataset {key} differs (max |difference| {diff:.3g})")
            for key in sorted(set(aa) | set(ab)):
                if key in ("mdtp_version", "git_commit") or not same_bits(aa.get(key), ab.get(key)):
                    if key not in ("mdtp_version", "git_commit"):
                        failures.append(f"{name}: attribute {key} differs: {aa.get(key)} vs {ab.get(key)}")
            print(f"{name}: {compared} datasets compared bit for bit")
            if compared == 0:
                failures.append(f"{name}: no datasets")

        import h5py
        steps = []
        for d in dirs:
            with h5py.File(os.path.join(d, "results.h5"), "r") as f:
                runs = sorted(f["runs"])
                steps.append(f["runs"][runs[-1]]["steps"][...])
        for column in ("step", "loss", "grad_norm"):
            if not same_bits(steps[0][column], steps[1][column]):
                failures.append(f"results steps table: column {column} differs")
        print(f"results: {len(steps[0])} steps, loss and grad_norm compared bit for bit")
    finally:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
