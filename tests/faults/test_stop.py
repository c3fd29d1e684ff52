#!/usr/bin/env python3
"""Graceful stop and non-finite steps of `mdtp train`, end to end (issue 16).

  test_stop.py --mdtp BIN --mpiexec M signal     SIGTERM to one rank mid-run: every rank stops after
                                                 the same step, exit 75, results and checkpoint
                                                 written, the earlier run in the results file intact
  test_stop.py --mdtp BIN --mpiexec M twice      two signals: the job ends at once, non-zero, the
                                                 results file as it was (byte for byte)
  test_stop.py --mdtp BIN --mpiexec M nonfinite  a checkpoint holding a NaN: training stops at step 1
                                                 with one line naming the tensor, once for the job; with
                                                 --skip-nonfinite every step is skipped and counted
"""
import argparse
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_watchdog import ranks_of  # noqa: E402

SMALL = ["--layers", "1", "--hidden", "16", "--heads", "2", "--seq", "8", "--global-batch", "2"]


def env():
    return dict(os.environ, OPENBLAS_NUM_THREADS="1", MDTP_BLAS_THREADS="1", MDTP_WAIT="polite")


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run(command, d, timeout=120):
    print("$", " ".join(command), flush=True)
    return subprocess.run(command, cwd=d, capture_output=True, text=True, timeout=timeout, env=env())


def start_and_wait_for_step(command, d, step):
    print("$", " ".join(command), flush=True)
    p = subprocess.Popen(command, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env(),
                         start_new_session=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(iter(p.stdout.readline, "")), daemon=True)
    reader.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and p.poll() is None and \
            not any(l.startswith("step") and int(l.split()[1]) >= step for l in list(lines)):
        time.sleep(0.05)
    return p, lines, reader


def finish(p, reader, lines, timeout):
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        reader.join(timeout=5)
        return None, "".join(lines)
    reader.join(timeout=10)
    return p.returncode, "".join(lines)


def check_signal(a, d, failures):
    import h5py
    r = run([a.mpiexec, "-n", "2", a.mdtp, "train", *SMALL, "--steps", "2", "--out", "results.h5"], d)
    if r.returncode != 0:
        return failures.append(f"first run failed: {r.stderr[-1000:]}")
    with h5py.File(os.path.join(d, "results.h5"), "r") as f:
        first = f["runs/0001-train/steps"][...]
    command = [a.mpiexec, "-n", "2", a.mdtp, "train", *SMALL, "--steps", "1000000", "--out", "results.h5",
               "--save", "ckpt.h5"]
    p, lines, reader = start_and_wait_for_step(command, d, 3)
    pids = ranks_of(a.mdtp, p.pid)
    if 1 not in pids:
        os.killpg(p.pid, signal.SIGKILL)
        return failures.append(f"could not find rank 1 (found {pids})")
    os.kill(pids[1], signal.SIGTERM)  # one rank only: the others learn it at the next agreement
    sent = time.monotonic()
    status, output = finish(p, reader, lines, 60)
    elapsed = time.monotonic() - sent
    print("\n".join(l for l in output.splitlines() if not l.startswith("step")))
    print(f"exit status {status}, {elapsed:.1f} s after SIGTERM")
    if status != 75:
        failures.append(f"exit status {status}, expected 75")
    if elapsed > 30:
        failures.append(f"took {elapsed:.1f} s to stop")
    stopped = [l for l in output.splitlines() if l.startswith("mdtp train: stopped by SIGTERM after step ")]
    if len(stopped) != 1:
        failures.append(f"{len(stopped)} 'stopped by SIGTERM' lines, expected 1 (rank 0)")
        return
    last = int(stopped[0].split("after step ")[1].split(";")[0])
    with h5py.File(os.path.join(d, "results.h5"), "r") as f:
        runs = sorted(f["runs"])
        if runs != ["0001-train", "0002-train"]:
            failures.append(f"runs {runs}")
            return
        if f["runs/0001-train/steps"][...].tobytes() != first.tobytes():
            failures.append("the earlier run's steps changed")
        steps = f["runs/0002-train/steps"][...]
        if len(steps) != last or int(steps["step"][-1]) != last:
            failures.append(f"the stopped run holds {len(steps)} steps, expected {last}")
        stopped_by = f["runs/0002-train"].attrs.get("stopped_by")
        if (stopped_by.decode() if isinstance(stopped_by, bytes) else stopped_by) != "SIGTERM":
            failures.append(f"stopped_by = {stopped_by!r}")
    with h5py.File(os.path.join(d, "ckpt.h5"), "r") as f:
        if int(f["optim"].attrs["step"]) != last:
            failures.append(f"the checkpoint is of step {int(f['optim'].attrs['step'])}, expected {last}")
        for key in ("mdtp_version", "git_commit", "mesh_world", "mesh_dp"):
            if key not in f.attrs:
                failures.append(f"the checkpoint has no root attribute {key}")
    r = run([a.mpiexec, "-n", "2", a.mdtp, "train", "--init-from", "ckpt.h5", "--steps", "1", "--global-batch", "2"], d)
    if r.returncode != 0:
        failures.append(f"resuming from the checkpoint failed: {r.stderr[-500:]}")
    print(f"stopped after step {last}; results and checkpoint read back")


def check_twice(a, d, failures):
    r = run([a.mpiexec, "-n", "2", a.mdtp, "train", *SMALL, "--steps", "2", "--out", "results.h5"], d)
    if r.returncode != 0:
        return failures.append(f"first run failed: {r.stderr[-1000:]}")
    before = sha(os.path.join(d, "results.h5"))
    command = [a.mpiexec, "-n", "2", a.mdtp, "train", *SMALL, "--steps", "1000000", "--out", "results.h5"]
    p, lines, reader = start_and_wait_for_step(command, d, 2)
    pids = ranks_of(a.mdtp, p.pid)
    if 0 not in pids or 1 not in pids:
        os.killpg(p.pid, signal.SIGKILL)
        return failures.append(f"could not find ranks 0 and 1 (found {pids})")
    # Rank 1 frozen: rank 0 waits in a collective and cannot reach the per-step agreement, so
    # the first signal is recorded and nothing else; the second must end it from inside the wait.
    os.kill(pids[1], signal.SIGSTOP)
    time.sleep(0.3)
    os.kill(pids[0], signal.SIGINT)
    time.sleep(0.5)  # delivered separately (two pending SIGINTs would merge into one)
    os.kill(pids[0], signal.SIGINT)
    sent = time.monotonic()
    status, output = finish(p, reader, lines, 60)
    elapsed = time.monotonic() - sent
    print(f"exit status {status}, {elapsed:.1f} s after the second SIGINT")
    if status in (0, 75, 124, None):
        failures.append(f"exit status {status}: expected the immediate exit (128 + SIGINT from rank 0)")
    if elapsed > 15:
        failures.append(f"took {elapsed:.1f} s to end")
    if sha(os.path.join(d, "results.h5")) != before:
        failures.append("the results file changed")
    leftovers = [n for n in os.listdir(d) if ".tmp-" in n]
    print(f"results file unchanged; leftovers {leftovers}")


def check_nonfinite(a, d, failures):
    import h5py
    import numpy as np
    r = run([a.mpiexec, "-n", "1", a.mdtp, "train", *SMALL, "--steps", "1", "--save", "good.h5"], d)
    if r.returncode != 0:
        return failures.append(f"fixture failed: {r.stderr[-1000:]}")
    shutil.copyfile(os.path.join(d, "good.h5"), os.path.join(d, "nan.h5"))
    with h5py.File(os.path.join(d, "nan.h5"), "r+") as f:
        data = f["transformer.h.0.mlp.c_fc.weight"][...]
        data[3, 5] = np.nan
        del f["transformer.h.0.mlp.c_fc.weight"]
        f["transformer.h.0.mlp.c_fc.weight"] = data
    before = sha(os.path.join(d, "nan.h5"))
    for extra in ([], ["--tp-mode", "1d", "--tp", "2"], ["--zero", "2"]):
        r = run([a.mpiexec, "-n", "2", a.mdtp, "train", "--init-from", "nan.h5", "--steps", "3", "--global-batch", "2",
                 "--out", "nan_results.h5", "--save", "never.h5", *extra], d)
        print(r.stderr)
        # The checkpoint is of step 1, so its first step here is step 2.
        errors = [l for l in r.stderr.splitlines() if l.startswith("mdtp train: error: step 2: the loss is NaN")]
        if r.returncode != 2 or len(errors) != 1 or "(on all 2 ranks)" not in errors[0]:  # once for the job
            failures.append(f"{extra}: exit {r.returncode}, error lines {errors}")
        elif "first non-finite gradient: 'transformer." not in errors[0]:
            failures.append(f"{extra}: the line names no tensor: {errors[0]}")
        if os.path.exists(os.path.join(d, "never.h5")):
            failures.append(f"{extra}: a checkpoint of the NaN state was written")
    r = run([a.mpiexec, "-n", "2", a.mdtp, "train", "--init-from", "nan.h5", "--steps", "3", "--global-batch", "2",
             "--out", "skip_results.h5", "--skip-nonfinite"], d)
    print(r.stdout, r.stderr)
    if r.returncode != 0:
        failures.append(f"--skip-nonfinite: exit {r.returncode}")
    else:
        with h5py.File(os.path.join(d, "skip_results.h5"), "r") as f:
            run_group = f["runs/0001-train"]
            if int(run_group.attrs["skipped_nonfinite_steps"]) != 3:
                failures.append(f"skipped_nonfinite_steps = {run_group.attrs['skipped_nonfinite_steps']}")
            if not np.all(np.isnan(run_group["steps"]["loss"])):
                failures.append("the skipped steps' losses are not NaN")
        if [l.split(":")[0] for l in r.stdout.splitlines() if l.startswith("skipped step")] != \
                ["skipped step 2", "skipped step 3", "skipped step 4"]:
            failures.append("rank 0 did not print one 'skipped step' line per step")
    if sha(os.path.join(d, "nan.h5")) != before:
        failures.append("the input checkpoint changed")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mdtp", required=True)
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("case", choices=["signal", "twice", "nonfinite"])
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix=f"mdtp-stop-{a.case}-")
    failures = []
    try:
        {"signal": check_signal, "twice": check_twice, "nonfinite": check_nonfinite}[a.case](a, d, failures)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
