#!/usr/bin/env python3
"""train_report.py's verdicts, held against real `mdtp train` results and against copies of them
with one number changed.

Two training runs on 2 ranks go into one results file (1D tp2; ZeRO-3 over dp2).  The report of
that file must say, for each run, that the ledger equals the whole-step model and that memory
equals its model on every rank, and must show each run's set-up time.  Then one number at a time
is changed in a copy of the file and the verdict must turn to DIFFERS, naming how many rows:
  - a ledger row's model bytes (last step);
  - a modelled memory row's bytes held after the last step;
  - the kept-activation peak and the ZeRO-3 run's gradients peak inside a step (rows modelled by
    their peak, not by what is held at the end);
and changing what a peak row holds at the end must NOT change the verdict (that row is compared
by its peak: the report once said DIFFERS for every run because of it).

    test_train_report.py --mpiexec mpiexec --mdtp build/mdtp --analysis experiments/analysis --dir DIR
"""
import argparse
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mpiexec", required=True)
    p.add_argument("--mdtp", required=True)
    p.add_argument("--analysis", required=True, help="the directory holding train_report.py")
    p.add_argument("--dir", required=True, help="a scratch directory (emptied first)")
    return p.parse_args()


FAILURES = []


def check(condition, what):
    print(("ok    " if condition else "FAIL  ") + what)
    if not condition:
        FAILURES.append(what)


def train(args, results, *options):
    command = [args.mpiexec, "-n", "2", args.mdtp, "train", "--steps", "2", "--out", results, *options]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stdout + done.stderr)
        sys.exit(f"{' '.join(command)} exited {done.returncode}")


def run_rows(lines):
    """{run name: its row of the main table} (the first table that names the run)."""
    rows = {}
    for line in lines:
        if line.startswith("| 0"):
            rows.setdefault(line.split("|")[1].strip(), line)
    return rows


def verdicts(path, out_dir):
    import mdtp_results
    import train_report
    runs = sorted(mdtp_results.load_runs(path, "train").values(), key=lambda r: r.number)
    os.makedirs(out_dir, exist_ok=True)
    lines, pictures = train_report.report(runs, out_dir)
    return runs, run_rows(lines), pictures


def edit(path, run, table, change):
    """Applies change(rows) to a copy of `table` of `run` and writes it back."""
    with h5py.File(path, "r+") as f:
        dataset = f["runs"][run][table]
        rows = dataset[()]
        change(rows)
        dataset[...] = rows


def row_index(rows, category, rank=0):
    for i, row in enumerate(rows):
        name = row["category"].decode() if isinstance(row["category"], bytes) else str(row["category"])
        if name == category and int(row["rank"]) == rank:
            return i
    sys.exit(f"no memory row for category {category} on rank {rank}")


def main():
    args = parse()
    sys.path.insert(0, os.path.abspath(args.analysis))
    shutil.rmtree(args.dir, ignore_errors=True)
    os.makedirs(args.dir)
    results = os.path.join(args.dir, "train.h5")
    train(args, results, "--tp-mode", "1d", "--tp", "2")
    train(args, results, "--tp-mode", "none", "--zero", "3")

    runs, rows, pictures = verdicts(results, os.path.join(args.dir, "report"))
    check(len(runs) == 2 and len(rows) == 2, f"two train runs reported ({sorted(rows)})")
    for name, row in rows.items():
        check("| equal |" in row, f"{name}: bytes vs model 'equal'")
        check("| equal on every rank |" in row, f"{name}: memory vs model 'equal on every rank'")
    for r in runs:
        setup = float(r.attrs.get("setup_model_seconds", -1)) + float(r.attrs.get("setup_optimizer_seconds", -1))
        check(setup > 0, f"{r.name}: set-up time recorded ({setup * 1e3:.1f} ms)")
        check(f"| {setup * 1e3:.1f} |" in rows[r.name], f"{r.name}: set-up time shown in its row")
    for picture in pictures:
        path = os.path.join(args.dir, "report", picture)
        check(os.path.getsize(path) > 1000, f"{picture} written")

    first, second = runs[0].name, runs[1].name
    last_step = int(runs[0].tables["ledger"]["step"].max())

    def tampered(label):
        path = os.path.join(args.dir, f"{label}.h5")
        shutil.copyfile(results, path)
        return path

    def add(column, index, amount):
        def change(rows):
            rows[column][index(rows)] += amount
        return change

    def first_of_last_step(rows):
        return int(np.flatnonzero(rows["step"] == last_step)[0])

    def category_row(category, rank=0):
        return lambda rows: row_index(rows, category, rank)

    # A ledger row's model bytes of the last step.
    path = tampered("ledger")
    edit(path, first, "ledger", add("model_logical_bytes", first_of_last_step, 1))
    _, rows, _ = verdicts(path, os.path.join(args.dir, "report-ledger"))
    check("| DIFFERS (1 keys) |" in rows[first], f"model bytes changed in one ledger row: {first} says DIFFERS (1 keys)")
    check("| equal |" in rows[second], f"... and {second} still says equal")

    # What a modelled category holds after the last step.
    path = tampered("held")
    edit(path, second, "memory", add("held_bytes", category_row("optimizer_state"), 4))
    _, rows, _ = verdicts(path, os.path.join(args.dir, "report-held"))
    check("DIFFERS on 1 (rank, category) rows" in rows[second], f"optimizer state held changed: {second} DIFFERS on 1 row")
    check("| equal on every rank |" in rows[first], f"... and {first} still equal on every rank")

    # The kept-activation peak, which is compared by its peak ...
    path = tampered("peak")
    edit(path, first, "memory", add("peak_bytes", category_row("activations_kept", 1), -8))
    _, rows, _ = verdicts(path, os.path.join(args.dir, "report-peak"))
    check("DIFFERS on 1 (rank, category) rows" in rows[first], f"kept-activation peak changed: {first} DIFFERS on 1 row")

    # The allocator's activation peak inside the steps (kept contexts + the working set), a peak row too.
    path = tampered("activations-in-step")
    edit(path, first, "memory", add("peak_bytes", category_row("activations_in_step", 1), 16))
    _, rows, _ = verdicts(path, os.path.join(args.dir, "report-activations-in-step"))
    check("DIFFERS on 1 (rank, category) rows" in rows[first],
          f"activation peak inside a step changed: {first} DIFFERS on 1 row")
    check("| equal on every rank |" in rows[second], f"... and {second} still equal on every rank")

    # The ZeRO-3 run's gradients peak inside its steps (the full buckets it held at once), also a peak row.
    path = tampered("gradients-in-step")
    edit(path, second, "memory", add("peak_bytes", category_row("gradients_in_step", 1), 64))
    _, rows, _ = verdicts(path, os.path.join(args.dir, "report-gradients-in-step"))
    check("DIFFERS on 1 (rank, category) rows" in rows[second],
          f"gradients peak inside a step changed: {second} DIFFERS on 1 row")
    check("| equal on every rank |" in rows[first], f"... and {first} still equal on every rank")

    # ... so what a peak row holds at the end does not matter.
    path = tampered("peak-held")
    edit(path, first, "memory", add("held_bytes", category_row("activations_kept"), 12345))
    _, rows, _ = verdicts(path, os.path.join(args.dir, "report-peak-held"))
    check("| equal on every rank |" in rows[first], f"kept activations held at the end changed: {first} still equal")

    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    print("train_report verdicts: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
