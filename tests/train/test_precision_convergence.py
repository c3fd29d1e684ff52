#!/usr/bin/env python3
"""bf16 and f16 (dynamic loss scaling) train as well as f32 on the shipped corpus.

Runs `mdtp train` for STEPS steps (default 200) in f32 with two seeds, and in bf16 and f16 with the
first seed, all appended to one results file, then holds the mean of each 16-bit run's last 20
losses within max(1 %, twice the f32 runs' seed-to-seed spread of that mean) of the f32 run's
with the same seed.  Writes the loss curves (experiments/analysis/train_report.py's
`loss_curves.png`) beside the results when matplotlib is there, and prints every figure.

  test_precision_convergence.py --mdtp BIN --mpiexec M --report experiments/analysis/report.py
                                [--steps 200] [--ranks 2] [--out DIR] -- EXTRA_TRAIN_ARGS...
"""
import argparse
import os
import subprocess
import sys
import tempfile


def train(a, d, dtype, seed, extra):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    command = [a.mpiexec, "-n", str(a.ranks), a.mdtp, "train", "--dtype", dtype, "--seed", str(seed),
               "--steps", str(a.steps), "--out", "precision.h5", *extra]
    print("$", " ".join(command), flush=True)
    r = subprocess.run(command, cwd=d, capture_output=True, text=True, timeout=900, env=env)
    if r.returncode != 0:
        raise SystemExit(f"FAILED: exit status {r.returncode}: {r.stderr[-3000:]}")


def last_means(path, tail=20):
    import h5py
    import numpy as np
    means = []
    with h5py.File(path, "r") as f:
        for name in sorted(f["runs"]):
            run = f["runs"][name]
            loss = np.asarray(run["steps"]["loss"], dtype=float)
            finite = loss[np.isfinite(loss)]
            means.append((run.attrs["dtype"] if "dtype" in run.attrs else name, float(np.mean(finite[-tail:])),
                          int(run.attrs.get("overflow_skipped_steps", 0))))
    return means


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mdtp", required=True)
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--report", help="experiments/analysis/report.py (the loss-curve plot)")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--out", help="directory to keep the results and the plot in")
    ap.add_argument("extra", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    extra = a.extra[1:] if a.extra[:1] == ["--"] else a.extra
    d = a.out or tempfile.mkdtemp(prefix="mdtp-precision-")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "precision.h5")
    if os.path.exists(path):
        os.remove(path)
    # f16 from a scale its first steps need not overflow down from (2^16), a short window.
    runs = [("f32", 1, []), ("f32", 2, []), ("bf16", 1, []),
            ("f16", 1, ["--initial-loss-scale", "65536", "--loss-scale-window", "50"])]
    for dtype, seed, more in runs:
        train(a, d, dtype, seed, extra + more)
    means = last_means(path)
    (_, f32_a, _), (_, f32_b, _) = means[0], means[1]
    spread = abs(f32_a - f32_b)
    bound = max(0.01 * f32_a, 2 * spread)
    print(f"mean of the last 20 losses after {a.steps} steps: f32 seed 1 {f32_a:.5f}, seed 2 {f32_b:.5f} "
          f"(spread {spread:.5f}); bound max(1 %, 2 x spread) = {bound:.5f}")
    failures = []
    for (label, mean, overflows), (dtype, _, _) in zip(means[2:], runs[2:]):
        gap = abs(mean - f32_a)
        print(f"  {dtype}: {mean:.5f}, |{dtype} - f32| = {gap:.5f} ({100 * gap / f32_a:.2f} %)"
              + (f", {overflows} overflow steps skipped" if dtype == "f16" else ""))
        if gap > bound:
            failures.append(f"{dtype}: {mean:.5f} is {gap:.5f} from f32's {f32_a:.5f} (bound {bound:.5f})")
    if a.report:
        r = subprocess.run([sys.executable, a.report, path, "--out", os.path.join(d, "report")], capture_output=True,
                           text=True, timeout=300)
        print(r.stdout[-2000:], r.stderr[-2000:])
        plot = os.path.join(d, "report", "loss_curves.png")
        if r.returncode == 0 and not os.path.exists(plot):
            failures.append(f"the report wrote no {plot}")
        elif r.returncode == 0:
            print(f"loss curves: {plot}")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
