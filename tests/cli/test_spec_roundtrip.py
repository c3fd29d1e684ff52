#!/usr/bin/env python3
"""One file for a run: predict it, run it, find it again (docs/architecture.md, "The run spec").

For each configuration below:
  1. `mdtp cost <flags> --write-config r.json --step-bytes --json` writes the resolved run spec and
     prints the exact byte plan of one step per (phase, group, op) for every pipeline stage;
  2. `mpiexec -n N mdtp train --config r.json --steps 2 --out r.h5` runs that spec;
  3. the run's `run_spec` attribute in r.h5 is byte-equal to r.json, and, for the last step, every
     (phase, group, op) of the ledger table (its largest rank) has the calls and logical bytes that
     cost predicted (the largest stage per key) — and cost predicted no key the run lacks.
Also `mdtp plan ... --write-config` then `mdtp cost --config` gives back the same spec.

Usage: test_spec_roundtrip.py --mdtp BIN --mpiexec MPIEXEC [--only LABEL]
Prints "N passed, M failed"; exit status 1 on any failure.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import h5py

TIMEOUT = 300

# (label, ranks, cost flags): every model size given (the shipped corpus has 65 characters).
CASES = [
    ("1d tp2 pp2 dp2 1f1b m2", 8,
     ["--tp", "2", "--pp", "2", "--micro-batches", "2", "--global-batch", "8"]),
    ("2d tp4 dp2 zero1", 8,
     ["--tp-mode", "2d", "--tp", "4", "--zero", "1", "--zero-bucket-mb", "0.01", "--global-batch", "8"]),
    ("none dp4 zero3 keep", 4,
     ["--tp-mode", "none", "--zero", "3", "--zero-keep-params", "--zero-bucket-mb", "0.01", "--global-batch", "8"]),
    ("1d-sp tp2 pp2 interleaved v2 m2 recompute full, uneven layers", 4,
     ["--tp-mode", "1d-sp", "--tp", "2", "--pp", "2", "--schedule", "interleaved", "--chunks", "2",
      "--micro-batches", "2", "--pp-layers", "1,2,2,1", "--layers", "6", "--recompute", "full",
      "--global-batch", "4"]),
]
MODEL = ["--layers", "4", "--hidden", "32", "--heads", "4", "--seq", "16", "--vocab", "65"]


def run(command, cwd):
    result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, cwd=cwd,
                            stdin=subprocess.DEVNULL)
    print("$", " ".join(command))
    print("exit status:", result.returncode)
    if result.returncode != 0:
        print("stdout:", result.stdout[-3000:])
        print("stderr:", result.stderr[-3000:])
    return result


def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def last_step_ledger(path):
    """{(phase, group, op): (calls, logical bytes)} of the last step, the largest rank per key."""
    with h5py.File(path, "r") as f:
        run_name = sorted(f["runs"].keys())[-1]
        group = f["runs"][run_name]
        spec = text(group.attrs["run_spec"])
        table = group["ledger"][()]
    last = table["step"].max()
    rows = table[table["step"] == last]
    measured = {}
    for row in rows:
        key = (text(row["phase"]), text(row["group"]), text(row["op"]))
        if row["calls"] > 0:
            measured[key] = (int(row["calls"]), int(row["logical_bytes"]))
    return spec, measured


def predicted(step_bytes):
    """{(phase, group, op): (calls, logical bytes)}, the largest stage per key (as the ledger table
    reports its largest rank)."""
    out = {}
    for stage in step_bytes["stages"]:
        for k in stage["keys"]:
            key = (k["phase"], k["group"], k["op"])
            calls, logical = out.get(key, (0, 0))
            out[key] = (max(calls, k["calls"]), max(logical, k["logical_bytes"]))
    return out


def check_case(mdtp, mpiexec, label, ranks, flags, directory):
    failures = []
    spec_path = os.path.join(directory, "r.json")
    out_path = os.path.join(directory, "r.h5")
    cost = run([mdtp, "cost"] + MODEL + flags + ["--gpus", str(ranks), "--write-config", spec_path,
                                                  "--step-bytes", "--json"], directory)
    if cost.returncode != 0:
        return [f"{label}: mdtp cost exited {cost.returncode}: {cost.stderr.strip()}"]
    plan = predicted(json.loads(cost.stdout))
    train = run([mpiexec, "-n", str(ranks), mdtp, "train", "--config", spec_path, "--steps", "2", "--out", out_path],
                directory)
    if train.returncode != 0:
        return [f"{label}: mdtp train --config exited {train.returncode}: {train.stderr.strip()[:500]}"]
    with open(spec_path) as f:
        written = f.read()
    stored, measured = last_step_ledger(out_path)
    if stored != written:
        failures.append(f"{label}: the results file's run_spec differs from cost's --write-config file")
    equal = 0
    for key in sorted(set(plan) | set(measured)):
        if plan.get(key) != measured.get(key):
            failures.append(f"{label}: {key}: cost predicted {plan.get(key)} (calls, bytes), the run measured "
                            f"{measured.get(key)}")
        else:
            equal += 1
    print(f"{label}: {equal} of {len(set(plan) | set(measured))} (phase, group, op) keys equal; "
          f"{sum(b for _, b in plan.values())} B predicted on the largest stage per key")
    return failures


def check_plan_to_cost(mdtp, directory):
    spec_path = os.path.join(directory, "plan.json")
    plan = run([mdtp, "plan"] + MODEL + ["--global-batch", "64", "--gpus", "8", "--cluster", "dgx-h100",
                                         "--tp", "2", "--write-config", spec_path, "--rank", "2"], directory)
    if plan.returncode != 0:
        return [f"plan --write-config exited {plan.returncode}: {plan.stderr.strip()}"]
    again = os.path.join(directory, "again.json")
    cost = run([mdtp, "cost", "--config", spec_path, "--write-config", again, "--cluster", "dgx-h100"], directory)
    if cost.returncode != 0:
        return [f"cost --config exited {cost.returncode}: {cost.stderr.strip()}"]
    with open(spec_path) as a, open(again) as b:
        first, second = a.read(), b.read()
    failures = []
    if first != second:
        failures.append("cost --config of plan's --write-config file wrote back another spec")
    if json.loads(first)["parallel"]["tp"] != 2:
        failures.append("plan --tp 2 --write-config wrote a spec whose tp is not 2")
    return failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mdtp", required=True)
    parser.add_argument("--mpiexec", required=True)
    parser.add_argument("--only")
    args = parser.parse_args()
    failures, checks = [], 0
    for label, ranks, flags in CASES:
        if args.only and args.only not in label:
            continue
        with tempfile.TemporaryDirectory() as directory:
            checks += 1
            found = check_case(args.mdtp, args.mpiexec, label, ranks, flags, directory)
            failures += found
    if not args.only:
        with tempfile.TemporaryDirectory() as directory:
            checks += 1
            failures += check_plan_to_cost(args.mdtp, directory)
    for f in failures:
        print("FAIL:", f)
    failed = sum(1 for _ in failures)
    print(f"{checks - min(checks, failed)} passed, {min(checks, failed)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
