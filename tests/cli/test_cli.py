#!/usr/bin/env python3
"""End-to-end checks of the `mdtp` command line (tests/cli/tests.cmake registers one ctest each).

  test_cli.py --mdtp BIN help CMD OPTION...      `mdtp CMD --help`: exit 0, usage and every OPTION
  test_cli.py --mdtp BIN help-all                 every command `mdtp --help` lists has a working --help
  test_cli.py --mdtp BIN version VERSION          `mdtp --version`: exit 0, the version and a git commit
  test_cli.py --mdtp BIN bad CMD TEXT -- ARGS...  `mdtp ARGS`: exit 2, one line `mdtp CMD: error: ...`
                                                  (CMD mdtp: `mdtp: error: ...`) on stderr containing
                                                  TEXT, nothing on stdout
  test_cli.py --mdtp BIN json KIND -- ARGS...     `mdtp ARGS` prints JSON with KIND's keys (mesh, cost,
                                                  cost-zero, cost-pipeline)
  test_cli.py --mdtp BIN --mpiexec M mpi-bad N CMD TEXT -- ARGS...
                                                  the refusal on N ranks: exit 2, no hang, one line
                                                  for the job (rank 0)
  test_cli.py --mdtp BIN --mpiexec M mpi-help N CMD
                                                  `mdtp CMD --help` on N ranks: exit 0, printed once
  test_cli.py --mdtp BIN renamed-flags            every spelling the one set of run flags replaced
                                                  (RENAMED below), given to its command: exit 2, one
                                                  line `mdtp CMD: error: OLD: was renamed; use NEW`
"""
import argparse
import json
import re
import subprocess
import sys

TIMEOUT = 120


def run(command):
    result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT)
    print("$", " ".join(command))
    print("exit status:", result.returncode)
    print("stdout:", result.stdout[-4000:])
    print("stderr:", result.stderr[-4000:])
    return result


def check_help(mdtp, command, options):
    failures = []
    r = run([mdtp, command, "--help"])
    if r.returncode != 0:
        failures.append(f"exit status {r.returncode}, expected 0")
    if f"Usage: mdtp {command}" not in r.stdout:
        failures.append(f"no 'Usage: mdtp {command}' line")
    for option in options:
        if not re.search(r"(^|[ ,])" + re.escape(option) + r"\b", r.stdout, re.M):
            failures.append(f"option {option} is not listed")
    if r.stderr:
        failures.append("something was written to stderr")
    return failures


def commands_listed(mdtp):
    r = run([mdtp, "--help"])
    if r.returncode != 0:
        return None, [f"mdtp --help: exit status {r.returncode}"]
    section = r.stdout.split("Subcommands:", 1)
    if len(section) != 2:
        return None, ["mdtp --help lists no subcommands"]
    names = []
    for line in section[1].splitlines():
        m = re.match(r"^  ([a-z][a-z0-9-]*)\s", line)
        if m:
            names.append(m.group(1))
        elif line.strip() and not line.startswith("    "):
            break
    return names, []


def check_help_all(mdtp):
    names, failures = commands_listed(mdtp)
    if names is None:
        return failures
    expected = {"mesh", "smoke", "train", "cost", "plan", "schedule", "calibrate", "bench", "experiment"}
    if not expected <= set(names):
        failures.append(f"mdtp --help lists {names}; expected at least {sorted(expected)}")
    for name in names:
        failures += [f"{name}: {f}" for f in check_help(mdtp, name, ["--help"])]
    return failures


def check_version(mdtp, version):
    r = run([mdtp, "--version"])
    failures = []
    if r.returncode != 0:
        failures.append(f"exit status {r.returncode}, expected 0")
    if not re.match(r"^mdtp " + re.escape(version) + r" \(git ([0-9a-f]{7,40}|unknown)", r.stdout):
        failures.append(f"expected 'mdtp {version} (git <commit>' at the start; got {r.stdout!r}")
    return failures


def check_refusal(result, command, text, lines_expected):
    failures = []
    if result.returncode != 2:
        failures.append(f"exit status {result.returncode}, expected 2")
    lines = result.stderr.splitlines()
    if len(lines) != lines_expected:
        failures.append(f"expected {lines_expected} line(s) on stderr, got {len(lines)}")
    prefix = "mdtp: error: " if command == "mdtp" else f"mdtp {command}: error: "
    for line in lines:
        if not line.startswith(prefix):
            failures.append(f"line does not start with {prefix!r}: {line!r}")
        if text not in line:
            failures.append(f"line does not contain {text!r}: {line!r}")
    if lines_expected == 1 and result.stdout:
        failures.append("something was written to stdout")
    return failures


# The spellings mdtp's one set of run flags replaced, per command: (command, old flag, its value or
# None for a switch, the new flag the refusal names).  The old spelling is refused while parsing,
# before MPI starts, so the MPI commands run here without mpiexec.
RENAMED = [
    ("train", "--embd", "64", "--hidden"),
    ("train", "--batch", "8", "--global-batch"),
    # cost, the model of a layer: --batch B was the layer's batch (rows B*seq), a micro-batch now;
    # --world W is tp x pp x dp.
    ("cost", "--mode", "1d", "--tp-mode"),
    ("cost", "--batch", "8", "--micro-batch-size"),
    ("cost", "--world", "8", "--dp"),
    ("cost", "--ffn", "256", "--ffn-hidden"),
    # cost --pipeline
    ("cost", "--microbatches", "8", "--micro-batches"),
    # cost, the GPT step
    ("cost", "--micro-batch", "1", "--micro-batch-size"),
    ("cost", "--zero-stage", "1", "--zero"),
    ("cost", "--no-dropout", None, "--dropout 0"),
    ("plan", "--micro-batch", "1", "--micro-batch-size"),
    ("plan", "--no-dropout", None, "--dropout 0"),
    ("bench", "--batch", "8", "--global-batch"),
    ("bench", "--ffn", "256", "--ffn-hidden"),
    ("bench", "--depth", "2", "--tp-depth"),
    ("experiment", "--batch", "4", "--global-batch"),
    ("experiment", "--ffn", "256", "--ffn-hidden"),
]


def check_renamed_flags(mdtp):
    failures = []
    for command, old, value, new in RENAMED:
        args = [command, old] + ([value] if value is not None else [])
        text = f"{old}: was renamed; use {new}"
        failures += [f"mdtp {' '.join(args)}: {f}" for f in check_refusal(run([mdtp] + args), command, text, 1)]
    return failures


def check_json(mdtp, kind, args):
    r = run([mdtp] + args)
    if r.returncode != 0:
        return [f"exit status {r.returncode}, expected 0"]
    try:
        doc = json.loads(r.stdout)
    except json.JSONDecodeError as e:
        return [f"not JSON: {e}"]
    keys = {
        "mesh": ["world", "order", "sizes", "groups", "tp_groups"],
        "cost": ["workload", "mesh", "links", "communication", "communication_seconds", "compute", "memory_bytes",
                 "published", "exact"],
        "cost-zero": ["parameters", "dp", "param_bytes", "grad_bytes", "optimizer_bytes", "stages"],
        "cost-pipeline": ["pp", "microbatches", "schedules"],
        "cost-step": ["bubble_fraction", "cluster", "compute", "config", "data_sheet_bound", "description", "fits",
                      "hardware_flops", "hfu", "memory",
                      "memory_capacity_bytes", "memory_per_gpu_bytes", "mfu", "model_flops", "nccl_algo", "placement", "step_s",
                      "tflops_per_gpu", "time", "tokens_per_s", "traffic"],
    }[kind]
    failures = []
    if list(doc.keys()) != keys:
        failures.append(f"top-level keys {list(doc.keys())}, expected {keys} in that order")
    if kind == "mesh":
        if list(doc["sizes"].keys()) != ["tp", "pp", "dp", "cp"]:
            failures.append(f"sizes keys {list(doc['sizes'].keys())}")
        tokens = ["tp", "pp", "dp", "cp", "tp-pp", "tp-dp", "dp-cp", "tp-dp-cp", "embedding"]
        if list(doc["groups"].keys()) != tokens:
            failures.append(f"groups keys {list(doc['groups'].keys())}, expected {tokens}")
        every = sorted(r for g in doc["groups"]["tp"] for r in g)
        if every != list(range(doc["world"])):
            failures.append("the tp groups do not cover every rank once")
        if "tp" not in doc["tp_groups"]:
            failures.append("tp_groups has no 'tp'")
    elif kind == "cost":
        for key in ["mode", "layer", "layers", "rows", "hidden", "ffn_hidden", "dtype", "keep_gathered_3d",
                    "data_parallel_group"]:
            if key not in doc["workload"]:
                failures.append(f"workload has no {key}")
        if not doc["communication"]:
            failures.append("no communication rows")
        for row in doc["communication"]:
            if list(row.keys()) != ["phase", "group", "op", "group_size", "link", "calls", "logical_bytes",
                                    "bus_bytes", "seconds", "algorithms"]:
                failures.append(f"communication row keys {list(row.keys())}")
                break
        if doc["published"]["label"] != "published, not normalised consistently":
            failures.append(f"published label {doc['published']['label']!r}")
        if list(doc["communication_seconds"].keys()) != ["forward", "backward", "grad-sync", "total"]:
            failures.append(f"communication_seconds keys {list(doc['communication_seconds'].keys())}")
        for key in ["parameters", "gradients", "optimizer", "activations_kept", "output", "total", "kept_per_layer"]:
            if key not in doc["memory_bytes"]:
                failures.append(f"memory_bytes has no {key}")
    elif kind == "cost-zero":
        if [s["stage"] for s in doc["stages"]] != [0, 1, 2, 3]:
            failures.append("stages are not 0, 1, 2, 3")
    elif kind == "cost-step":
        # The whole-step figures hang together: tokens/s from the step time and the batch, MFU from the
        # model FLOPs, HFU ≥ MFU (recomputation adds hardware FLOPs), the time split sums to the step.
        c = doc["config"]
        tokens = c["global_batch"] * c["model"]["seq"]
        if not doc["step_s"] > 0 or abs(doc["tokens_per_s"] * doc["step_s"] - tokens) > 1e-6 * tokens:
            failures.append(f"tokens_per_s {doc['tokens_per_s']} x step_s {doc['step_s']} != {tokens} tokens")
        if not 0 < doc["mfu"] <= doc["hfu"] < 1:
            failures.append(f"expected 0 < mfu {doc['mfu']} <= hfu {doc['hfu']} < 1")
        split = sum(doc["time"].values())
        if abs(split - doc["step_s"]) > 1e-9 * doc["step_s"]:
            failures.append(f"the time split sums to {split}, the step is {doc['step_s']}")
        if doc["memory_per_gpu_bytes"] <= 0:
            failures.append("no memory per GPU")
    elif kind == "cost-pipeline":
        if [s["schedule"] for s in doc["schedules"]][:2] != ["gpipe", "1f1b"]:
            failures.append("schedules do not start with gpipe, 1f1b")
        for s in doc["schedules"]:
            if len(s["peak_in_flight_per_stage"]) != doc["pp"]:
                failures.append("peak_in_flight_per_stage does not have one entry per stage")
    return failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mdtp", required=True)
    parser.add_argument("--mpiexec")
    parser.add_argument("check", choices=["help", "help-all", "version", "bad", "json", "mpi-bad", "mpi-help",
                                          "renamed-flags"])
    parser.add_argument("rest", nargs=argparse.REMAINDER)
    a = parser.parse_args()
    rest = a.rest
    args = []
    if "--" in rest:
        i = rest.index("--")
        rest, args = rest[:i], rest[i + 1:]
    if a.check == "help":
        failures = check_help(a.mdtp, rest[0], rest[1:])
    elif a.check == "help-all":
        failures = check_help_all(a.mdtp)
    elif a.check == "version":
        failures = check_version(a.mdtp, rest[0])
    elif a.check == "bad":
        failures = check_refusal(run([a.mdtp] + args), rest[0], rest[1], 1)
    elif a.check == "json":
        failures = check_json(a.mdtp, rest[0], args)
    elif a.check == "renamed-flags":
        failures = check_renamed_flags(a.mdtp)
    elif a.check == "mpi-help":
        r = run([a.mpiexec, "-n", rest[0], a.mdtp, rest[1], "--help"])
        failures = [] if r.returncode == 0 else [f"exit status {r.returncode}, expected 0"]
        count = r.stdout.count(f"Usage: mdtp {rest[1]}")
        if count != 1:
            failures.append(f"the help was printed {count} times; expected once (rank 0)")
    else:
        ranks = int(rest[0])
        # Printed once for the job, by rank 0, however many ranks refused it.
        failures = check_refusal(run([a.mpiexec, "-n", str(ranks), a.mdtp] + args), rest[1], rest[2], 1)
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
