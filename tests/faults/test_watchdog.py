#!/usr/bin/env python3
"""A rank that stops answering ends the job: the collective watchdog end to end.

  test_watchdog.py --mpiexec M --ranks N --timeout S --wait POLICY program PROGRAM OP
      runs tests/faults/hang_rank.cpp (one rank never joins OP) with MDTP_COLLECTIVE_TIMEOUT=S
      and MDTP_WAIT=POLICY
  test_watchdog.py --mpiexec M --ranks N --timeout S --wait POLICY mdtp MDTP
      runs `mdtp train --collective-timeout S` and stops (SIGSTOP) its last rank mid-run

Either way: the job must end non-zero, after at least S seconds and within S + margin, and its
output must hold the watchdog's line naming the rank, the group, the op, the element count, the
phase and (for OP runs) the step.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time

LINE = re.compile(
    r"mdtp: rank (\d+): collective timeout: (\S+) on group '([^']+)'( of (\d+) elements)?"
    r"( in phase '([^']*)')?( at step (\d+))? did not complete within ([0-9.]+) s "
    r"\(MDTP_COLLECTIVE_TIMEOUT / --collective-timeout\); a rank stopped answering, aborting the job")


def ranks_of(mdtp, launcher_pid):
    """The pids of `mdtp` processes below `launcher_pid`, by their PMI_RANK."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    found, todo = {}, [launcher_pid]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            todo.append(child)
            try:
                exe = os.readlink(f"/proc/{child}/exe")
                with open(f"/proc/{child}/environ", "rb") as f:
                    env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
            except OSError:
                continue
            if os.path.realpath(exe) == os.path.realpath(mdtp) and b"PMI_RANK" in env:
                found[int(env[b"PMI_RANK"])] = child
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=3.0)
    ap.add_argument("--margin", type=float, default=20.0, help="seconds allowed past the timeout")
    ap.add_argument("--wait", default="polite")
    ap.add_argument("kind", choices=["program", "mdtp"])
    ap.add_argument("binary")
    ap.add_argument("op", nargs="?", default="all_reduce")
    a = ap.parse_args()

    env = dict(os.environ, MDTP_WAIT=a.wait, OPENBLAS_NUM_THREADS="1")
    if a.kind == "program":
        env["MDTP_COLLECTIVE_TIMEOUT"] = str(a.timeout)
        command = [a.mpiexec, "-n", str(a.ranks), a.binary, a.op]
    else:
        env.pop("MDTP_COLLECTIVE_TIMEOUT", None)
        command = [a.mpiexec, "-n", str(a.ranks), a.binary, "train", "--tp-mode", "1d", "--tp", str(a.ranks),
                   "--layers", "1", "--hidden", "16", "--heads", "2", "--seq", "8", "--global-batch", "2",
                   "--steps", "100000", "--collective-timeout", str(a.timeout)]
    print("$", " ".join(command), f"(MDTP_WAIT={a.wait})", flush=True)
    limit = a.timeout + a.margin
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    lines_seen = []
    reader = threading.Thread(target=lambda: lines_seen.extend(iter(process.stdout.readline, "")), daemon=True)
    reader.start()
    failures = []
    if a.kind == "mdtp":
        # Freeze the last rank once training runs (set-up calls such as MPI_Comm_create_group
        # block inside MPI and have no deadline): after the second step's line.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None and \
                not any(l.startswith("step") and int(l.split()[1]) >= 2 for l in list(lines_seen)):
            time.sleep(0.1)
        pids = ranks_of(a.binary, process.pid)
        if len(pids) < a.ranks:
            failures.append(f"found the pids of ranks {sorted(pids)} only")
        else:
            try:
                os.kill(pids[a.ranks - 1], signal.SIGSTOP)
                print(f"stopped rank {a.ranks - 1} (pid {pids[a.ranks - 1]})", flush=True)
            except ProcessLookupError:
                failures.append("the run ended before its last rank could be stopped")
    stopped_at = time.monotonic()
    try:
        process.wait(timeout=limit + 30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        failures.append(f"the job was still running {limit + 30:.0f} s later (killed)")
    reader.join(timeout=10)
    output = "".join(lines_seen)
    elapsed = time.monotonic() - stopped_at
    print("\n".join(l for l in output.splitlines() if not l.startswith("step"))[-6000:])
    print(f"exit status {process.returncode}, {elapsed:.1f} s after the rank went silent")

    if process.returncode == 0:
        failures.append("the job exited 0")
    # A wait that began just before the rank was frozen ends a little under the deadline after it.
    if elapsed < a.timeout - 0.5:
        failures.append(f"the job ended after {elapsed:.1f} s, before the {a.timeout} s deadline")
    if elapsed > limit:
        failures.append(f"the job ended after {elapsed:.1f} s, over the deadline plus {a.margin} s")
    lines = [m for m in (LINE.search(l) for l in output.splitlines()) if m]
    if not lines:
        failures.append("no watchdog line in the output")
    for m in lines:
        rank = int(m.group(1))
        if rank == a.ranks - 1:
            failures.append(f"the silent rank {rank} reported a timeout")
        if float(m.group(10)) != a.timeout:
            failures.append(f"the line names a timeout of {m.group(10)} s")
        if a.kind == "program":
            if (m.group(2), m.group(3), m.group(7), m.group(9)) != (a.op, "world", "forward", "7"):
                failures.append(f"line names op {m.group(2)} group {m.group(3)} phase {m.group(7)} step {m.group(9)}")
            if a.op != "barrier" and m.group(5) != "1000":
                failures.append(f"line names {m.group(5)} elements, expected 1000")
    if "completed, which it must not" in output:
        failures.append("the collective completed")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
