#!/usr/bin/env python3
"""Checks the files written by the bench ctest entries (tests/bench/tests.cmake) with h5py:

  bench.h5        two invocations of `mdtp bench --modes all` on 4 ranks appended to one file:
                  one run per mode per invocation, numbered in order, two batch ids; the second
                  used the calibration.  Every run has the provenance attributes and the six
                  tables; measured bytes equal the model's on every (phase, group, op) row; the
                  correctness check passed.
  calibration.h5  one calibrate run on 2 ranks: sweep rows all correct, collective fits covering
                  every op swept, link parameters and GEMM rates, nothing negative.
Then runs report.py on bench.h5 and checks that the PNGs and summary.md are there and not empty.
"""
import argparse
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

PROVENANCE = ["mdtp_version", "git_commit", "build_type", "compiler", "command_line", "utc_time", "hosts",
              "host_count", "world_size", "mesh_tp", "mesh_pp", "mesh_dp", "mesh_cp", "mesh_order", "mesh_tp_mode",
              "mesh_tp_depth", "mesh_ranks_per_node", "mode", "dtype", "backend", "mpi_library", "wait_policy",
              "local_ranks", "cores", "oversubscription", "oversubscribed", "host_cpu_model", "host_gemm",
              "host_blas_library", "host_blas_threads", "host_vector_math", "host_malloc"]
BENCH_ATTRS = ["layer", "rows", "hidden", "ffn_hidden", "reps", "warmup", "check", "batch_id", "calibration",
               "calibrated", "bytes_match"]
BENCH_TABLES = ["comm", "steps", "phases", "memory", "check", "summary"]


class Checker:
    def __init__(self):
        self.failures = []

    def expect(self, condition, message):
        if not condition:
            self.failures.append(message)
        return condition


def check_bench(c, path, modes, batches):
    import mdtp_results
    runs = mdtp_results.load_runs(path)
    bench = [r for r in runs.values() if r.kind == "bench"]
    c.expect(len(bench) == len(modes) * batches,
             f"{path}: expected {len(modes) * batches} bench runs ({batches} × {modes}), got {[r.name for r in bench]}")
    c.expect([r.number for r in bench] == list(range(1, len(bench) + 1)), "runs are not numbered 1, 2, ... in order")
    batch_ids = []
    for r in bench:
        if r.attrs.get("batch_id") not in batch_ids:
            batch_ids.append(r.attrs.get("batch_id"))
    c.expect(len(batch_ids) == batches, f"expected {batches} batch ids, got {batch_ids}")
    for b, batch in enumerate(batch_ids):
        got = [r.attrs["mode"] for r in bench if r.attrs.get("batch_id") == batch]
        c.expect(got == modes, f"batch {b}: modes {got}, expected {modes}")
    for r in bench:
        for key in PROVENANCE + BENCH_ATTRS:
            c.expect(key in r.attrs, f"{r.name}: attribute {key} missing")
        for table in BENCH_TABLES:
            c.expect(table in r.tables, f"{r.name}: table {table} missing")
        if "comm" not in r.tables:
            continue
        comm = r.tables["comm"]
        c.expect(len(comm) > 0, f"{r.name}: the comm table is empty")
        for row in comm:
            key = f"{r.name} {row['phase']}/{row['group']}/{row['op']}"
            c.expect(row["bytes_mean"] == row["bytes_model"] and row["bytes_max"] == row["bytes_model"],
                     f"{key}: measured bytes mean {row['bytes_mean']} max {row['bytes_max']} != model {row['bytes_model']}")
            c.expect(row["calls_max"] == row["calls_model"], f"{key}: calls {row['calls_max']} != model {row['calls_model']}")
            c.expect(row["bytes_match"] == 1, f"{key}: bytes_match is not 1")
        # Wait (skew) beside the transfer: the columns are always there; without sync timing nothing
        # is synchronised; with it (the second batch) 1d's blocking all-reduces are (2d/2.5d/3d
        # may issue only non-blocking calls, which are never synchronised), no wait is negative.
        for col in ["wait_mean", "wait_max", "synchronised_calls"]:
            c.expect(col in comm.dtype.names, f"{r.name}: comm table lacks {col}")
        if "synchronised_calls" in comm.dtype.names and "wait_mean" in comm.dtype.names:
            synced = int(r.attrs.get("sync_timing", 0)) == 1
            count = np.sum(comm["synchronised_calls"])
            if not synced or r.attrs["mode"] in ("1d", "1d-sp"):
                c.expect((count > 0) == synced, f"{r.name}: synchronised calls {count} with sync_timing={synced}")
            c.expect(np.all(comm["wait_mean"] >= 0), f"{r.name}: a negative wait")
        c.expect("wait_max" in r.tables["steps"].dtype.names, f"{r.name}: steps table lacks wait_max")
        s = r.tables["summary"][0]
        c.expect(s["bytes_match"] == 1 and s["bytes_ratio"] == 1.0, f"{r.name}: summary bytes ratio {s['bytes_ratio']}")
        c.expect(s["check"] == "passed" and r.attrs["check"] == "passed", f"{r.name}: check {s['check']}")
        c.expect(all(r.tables["check"]["passed"] == 1), f"{r.name}: a tensor failed the check")
        c.expect(len(r.tables["steps"]) == int(r.attrs["reps"]) * 4, f"{r.name}: steps table has {len(r.tables['steps'])} rows")
        c.expect(np.all(r.tables["steps"]["wall_max"] > 0), f"{r.name}: a step has no wall time")
        c.expect(s["step_s"] > 0 and s["peak_bytes"] > 0, f"{r.name}: no step time or peak memory")
        c.expect(int(r.attrs["world_size"]) == 4, f"{r.name}: world_size {r.attrs['world_size']}")
    first = [r for r in bench if r.attrs.get("batch_id") == batch_ids[0]]
    last = [r for r in bench if r.attrs.get("batch_id") == batch_ids[-1]]
    c.expect(all(r.attrs["calibrated"] == 0 for r in first), "the first batch should use default link parameters")
    c.expect(all(r.attrs["calibrated"] == 1 for r in last), "the second batch should use the calibration")
    c.expect(all(r.attrs["sync_timing"] == 0 for r in first), "the first batch runs without sync timing")
    c.expect(all(r.attrs["sync_timing"] == 1 for r in last), "the second batch runs with --sync-timing")


def check_calibration(c, path):
    import mdtp_results
    runs = mdtp_results.load_runs(path, kind="calibrate")
    if not c.expect(len(runs) == 1, f"{path}: expected one calibrate run, got {list(runs)}"):
        return
    run = next(iter(runs.values()))
    for key in PROVENANCE + ["all_correct", "allow_oversubscribed"]:
        c.expect(key in run.attrs, f"{run.name}: attribute {key} missing")
    c.expect(run.attrs.get("oversubscribed") == 0, f"{run.name}: 2 ranks should not be oversubscribed here")
    for table in ["sweep", "collective_fits", "link_params", "gemm_rates"]:
        c.expect(table in run.tables, f"{run.name}: table {table} missing")
    sweep, fit = run.tables.get("sweep"), run.tables.get("collective_fits")
    if sweep is None or fit is None or "link_params" not in run.tables or "gemm_rates" not in run.tables:
        return
    c.expect(len(run.tables["link_params"]) >= 1 and np.all(run.tables["link_params"]["beta_s_per_byte"] >= 0),
             f"{run.name}: no link parameters or a negative β")
    c.expect(set(run.tables["gemm_rates"]["dtype"]) == {"f32", "f64"} and np.all(run.tables["gemm_rates"]["flops_mean"] > 0),
             f"{run.name}: GEMM rates missing")
    c.expect(len(sweep) > 0 and all(sweep["correct"] == 1), f"{run.name}: a sweep point is wrong or none measured")
    c.expect(set(sweep["op"]) == {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"},
             f"{run.name}: ops swept {set(sweep['op'])}")
    c.expect(set(fit["op"]) >= set(sweep["op"]), f"{run.name}: fit rows {set(fit['op'])} do not cover the ops")
    c.expect(np.all(fit["alpha_s"] >= 0) and np.all(fit["beta_s_per_byte"] >= 0), f"{run.name}: negative α or β")


def check_report(c, report, path, out):
    result = subprocess.run([sys.executable, report, path, "--out", out], capture_output=True, text=True)
    print(result.stdout)
    print(result.stderr, file=sys.stderr)
    c.expect(result.returncode == 0, f"report.py exited with {result.returncode}")
    for name in ["bytes_per_mode.png", "time_split.png", "comm_time.png", "summary.md"]:
        file = os.path.join(out, name)
        c.expect(os.path.isfile(file) and os.path.getsize(file) > 0, f"report.py did not write {file}")
    summary = os.path.join(out, "summary.md")
    if os.path.isfile(summary):
        text = open(summary).read()
        c.expect("| mode / mesh |" in text and "1.000" in text, "summary.md lacks the comparison table")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", required=True)
    parser.add_argument("--calibration", required=True)
    parser.add_argument("--report", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--batches", type=int, default=2)
    parser.add_argument("--modes", default="1d,1d-sp,2d,2.5d")
    args = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(args.report)))
    c = Checker()
    check_bench(c, args.bench, args.modes.split(","), args.batches)
    check_calibration(c, args.calibration)
    check_report(c, args.report, args.bench, args.out)
    for f in c.failures:
        print("FAIL:", f)
    if not c.failures:
        print("ok: bench and calibration results verified, report written")
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
