#!/usr/bin/env python3
"""`mdtp calibrate` must refuse an oversubscribed run: exit status 2, a message saying why and
naming --allow-oversubscribed, once for the job (raised on every rank), and no results file.

Oversubscription is made independent of the machine's size: this process pins itself to one CPU
before launching 2 ranks, and the ranks inherit the mask (mdtp counts the union of the ranks'
affinity masks as the node's cores).  Where the affinity cannot be set, it launches one rank more
than the usable cores.
"""
import argparse
import os
import subprocess
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mpiexec", required=True)
    parser.add_argument("--mdtp", required=True)
    parser.add_argument("--dir", required=True)
    args = parser.parse_args()

    os.makedirs(args.dir, exist_ok=True)
    out = os.path.join(args.dir, "refused.h5")
    if os.path.exists(out):
        os.remove(out)
    ranks = 2
    try:
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    except (AttributeError, OSError):
        ranks = len(os.sched_getaffinity(0)) + 1 if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1) + 1
    command = [args.mpiexec, "-n", str(ranks), args.mdtp, "calibrate", "--max-bytes", "1K", "--out", out]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    print(" ".join(command))
    print("exit status:", result.returncode)
    print("stdout:", result.stdout)
    print("stderr:", result.stderr)

    failures = []
    if result.returncode != 2:
        failures.append(f"expected exit status 2, got {result.returncode}")
    if "refusing to calibrate oversubscribed" not in result.stderr:
        failures.append("the error message does not say it refuses an oversubscribed run")
    if "--allow-oversubscribed" not in result.stderr:
        failures.append("the error message does not name --allow-oversubscribed")
    # Printed once for the job, by rank 0, saying every rank refused.
    if result.stderr.count("refusing to calibrate oversubscribed") != 1 or f"(on all {ranks} ranks)" not in result.stderr:
        failures.append(f"expected the refusal once for the job, on all {ranks} ranks")
    if os.path.exists(out):
        failures.append(f"a results file was written: {out}")
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("ok: the oversubscribed calibration was refused and nothing was written")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
