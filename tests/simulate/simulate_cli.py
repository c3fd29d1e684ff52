#!/usr/bin/env python3
"""`mdtp simulate` (docs/simulate.md).

Always: bad input is refused in one line before anything starts (no platform written, no smpirun).
Where SimGrid's smpirun and an SMPI build of mdtp are present (BUILD-smpi/mdtp beside BUILD/mdtp,
or $MDTP_SMPI_MDTP): the real engines on 64 simulated DGX H100 GPUs in every TP mode with a
pipeline and ZeRO-3 — the ledger equals the model for every (phase, group, op), every memory figure
equals the model on every rank, the results file says 'simulated' with the SimGrid version and
every --cfg, and the same command twice gives the same simulated step times.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

import h5py

mdtp = os.path.abspath(sys.argv[1])
failures = []


def run(args, cwd, env=None):
    return subprocess.run([mdtp, "simulate"] + args, cwd=cwd, capture_output=True, text=True, timeout=600,
                          env=None if env is None else {**os.environ, **env})


def refused(args, expect, cwd):
    p = run(args, cwd)
    err = p.stderr.strip().splitlines()
    ok = p.returncode != 0 and len(err) == 1 and expect in err[0] and not os.path.exists(os.path.join(cwd, "results"))
    print(("ok    " if ok else "FAIL  ") + " ".join(args) + "\n      -> " + (err[0] if err else "(no error line)"))
    if not ok:
        failures.append(" ".join(args))


with tempfile.TemporaryDirectory() as tmp:
    tiny = os.path.join(tmp, "tiny.xml")
    with open(tiny, "w") as f:
        f.write('<?xml version="1.0"?>\n<platform version="4.1"><zone id="z" routing="Full">'
                '<host id="a" speed="1f"/><host id="b" speed="1f"/></zone></platform>\n')
    refused(["--cluster", "no-such-cluster", "--gpus", "8", "--", "train"], "no-such-cluster", tmp)
    refused(["--cluster", "dgx-h100", "--gpus", "8", "--", "calibrate"], "on the simulated cluster; got 'calibrate'", tmp)
    refused(["--cluster", "dgx-h100", "--gpus", "8"], "needs the command to simulate after --", tmp)
    refused(["--cluster", "dgx-h100", "--gpus", "0", "--", "train"], "--gpus must be >= 1; got 0", tmp)
    refused(["--cluster", "dgx-h100", "--gpus", "8", "--smpi-mdtp", "/nonexistent/mdtp", "--", "train"],
            "does not exist", tmp)
    # Synthetic values run `train` alone, without checkpoints, which hold values.
    refused(["--cluster", "dgx-h100", "--gpus", "8", "--values", "fake", "--", "train"],
            "--values must be real or synthetic; got 'fake'", tmp)
    refused(["--cluster", "dgx-h100", "--gpus", "8", "--values", "synthetic", "--", "bench"],
            "--values synthetic runs `train` only", tmp)
    refused(["--cluster", "dgx-h100", "--gpus", "8", "--values", "synthetic", "--", "train", "--save=c.h5"],
            "--values synthetic: train --save reads or writes values", tmp)
    # The study driver refuses what it cannot run, in one line, before any simulation.
    study = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "experiments", "analysis",
                         "simulate_study.py")
    for extra, expect in ((["--modes", "1d,4d"], "unknown mode '4d'"),
                          (["--sizes", "100"], "100 GPUs do not split into tp 8 x pp 4 for mode 1d"),
                          (["--mdtp", "/nonexistent/mdtp"], "is not an executable")):
        p = subprocess.run([sys.executable, study, "--mdtp", mdtp, "--out", os.path.join(tmp, "s.h5")] + extra,
                           cwd=tmp, capture_output=True, text=True)
        err = p.stderr.strip().splitlines()
        ok = p.returncode == 2 and len(err) == 1 and expect in err[0] and not os.path.exists(os.path.join(tmp, "s.h5"))
        print(("ok    " if ok else "FAIL  ") + "simulate_study.py " + " ".join(extra) + "\n      -> " +
              (err[0] if err else "(no error line)"))
        if not ok:
            failures.append("simulate_study.py " + " ".join(extra))

    smpi = os.environ.get("MDTP_SMPI_MDTP") or os.path.join(os.path.dirname(mdtp) + "-smpi", "mdtp")
    if not (shutil.which("smpirun") and os.path.exists(smpi)):
        print(f"no SMPI run: smpirun {'found' if shutil.which('smpirun') else 'missing'}, "
              f"SMPI build {smpi} {'found' if os.path.exists(smpi) else 'missing'} (./quickstart.sh simulate builds it)")
        sys.exit(1 if failures else 0)
    refused(["--cluster", "dgx-h100", "--gpus", "8", "--smpi-mdtp", smpi, "--platform", tiny, "--", "train"],
            "declares 2 hosts; --gpus 8 needs one per GPU", tmp)

    # Single ring collectives on 16 simulated GPUs (2 nodes): NVLink groups of 8, rail groups of 2,
    # no link shared: the simulated time is the alpha-beta model's for the same ring within 5 %
    # from 1 MiB up (the route's latency is the model's alpha, the links its bandwidth x efficiency).
    p = run(["--cluster", "dgx-h100", "--gpus", "16", "--smpi-mdtp", smpi, "--", "collectives", "--sizes",
             "64K,1M,16M", "--iters", "2"], tmp)
    # And one ring through both nodes (a TP group larger than a node): its hops between nodes each
    # leave through one NIC, where NCCL's eight channels would leave through eight (the `nccl`
    # column): the named place where mdtp's ring and NCCL part.
    # Last column: the share of the bytes moved beside another pair's transfer on a link / while a
    # link was asked more than its bandwidth (the links' traffic as the simulator saw it): none in
    # the node and rail groups, which the model prices as sharing nothing; in the span, the two hops
    # between nodes cross rails, and SimGrid's shortest route relays each through a GPU's NVLink
    # (PXN's path), where they meet: shared, never over the NVLink's bandwidth.
    rows = re.findall(r"^(node|rail|span) +(\d+) +(\S+) +(\d+) +(\S+) +(\S+) +(\S+) +(\S+) +(\S+)/(\S+)%$",
                      p.stdout, re.M)
    print("      " + "\n      ".join(p.stdout.strip().splitlines()[-28:]))
    big = [r for r in rows if int(r[3]) >= 1 << 20]
    worst = max((abs(float(r[6]) - 1) for r in big), default=1)
    spans = [r for r in big if r[0] == "span" and int(r[3]) >= 16 << 20]
    unshared = all(r[8] == "0.0" and r[9] == "0.0" for r in rows if r[0] != "span")
    relayed = all(float(r[8]) > 0 and r[9] == "0.0" for r in rows if r[0] == "span")
    ok = p.returncode == 0 and len(rows) == 27 and len(big) == 18 and worst <= 0.05 and len(spans) == 3 and \
        all(float(r[7]) * 2 < float(r[4]) for r in spans) and unshared and relayed
    print(("ok    " if ok else "FAIL  ") + f"collectives on 16 simulated GPUs: {len(big)} rows >= 1 MiB, "
          f"worst |simulated/model - 1| = {worst:.4f}; a 16 MiB ring through both nodes "
          f"{[r[4] for r in spans]} us against NCCL's channels {[r[7] for r in spans]} us; no link shared in the "
          f"node and rail groups: {unshared}; the span's shared, none full: {[r[8] + '/' + r[9] for r in spans]} %")
    if not ok:
        failures.append("collectives")

    # mdtp bench under simulation: every mode's layer step on 8 simulated GPUs, the serial check
    # passed (the values are real), the ledger's bytes equal the model's, the model's links the
    # simulated cluster's; --calibration is refused there in one line.
    p = run(["--cluster", "dgx-h100", "--gpus", "8", "--smpi-mdtp", smpi, "--", "bench", "--modes",
             "1d,1d-sp,2d,2.5d,3d", "--out", os.path.join(tmp, "bench.h5")], tmp)
    table = p.stdout.split("== comparison")[-1]
    bench_rows = [(line.split()[0], line.split("|")[1].split()[1], line.split("|")[-1].split()[0])
                  for line in table.splitlines() if " tp=" in line and line.count("|") >= 6]
    # Its model columns price the simulated cluster's links, not the host's defaults.
    ok = p.returncode == 0 and len(bench_rows) == 5 and all(r[1] == "1.000" and r[2] == "passed" for r in bench_rows) \
        and "link parameters: the simulated cluster dgx-h100" in p.stdout
    print(("ok    " if ok else "FAIL  ") + f"bench on 8 simulated GPUs: {bench_rows}, links of the simulated cluster")
    if not ok:
        print(p.stdout[-3000:], p.stderr[-3000:])
        failures.append("bench")

    # Bad input on the simulated ranks: every rank refuses it, the error is printed once.
    p = run(["--cluster", "dgx-h100", "--gpus", "8", "--smpi-mdtp", smpi, "--", "bench", "--modes", "1d",
             "--calibration", "x.h5"], tmp)
    errors = [line for line in (p.stdout + p.stderr).splitlines() if " error: " in line]
    ok = p.returncode == 2 and len(errors) == 1 and "--calibration" in errors[0] and "(on all 8 ranks)" in errors[0]
    print(("ok    " if ok else "FAIL  ") + "a flag the simulated ranks refuse: " + (errors[0] if errors else "(no error line)"))
    if not ok:
        print(p.stdout[-3000:], p.stderr[-3000:])
        failures.append("simulated refusal")

    # Every TP mode with a 2-stage pipeline and ZeRO-3 on 64 simulated GPUs (8 DGX H100 nodes).
    cases = [
        ("1d", ["--tp-mode", "1d", "--tp", "4"]),
        ("1d-sp", ["--tp-mode", "1d-sp", "--tp", "4"]),
        ("2d", ["--tp-mode", "2d", "--tp", "4"]),
        ("2.5d", ["--tp-mode", "2.5d", "--tp", "8", "--tp-depth", "2"]),
        ("3d", ["--tp-mode", "3d", "--tp", "8"]),
    ]
    common = ["--pp", "2", "--zero", "3", "--micro-batches", "2", "--steps", "2", "--layers", "4",
              "--global-batch", "128"]
    losses = {}
    for name, mode in cases:
        out = os.path.join(tmp, f"{name}.h5")
        args = ["--cluster", "dgx-h100", "--gpus", "64", "--smpi-mdtp", smpi, "--", "train"] + mode + common + \
            ["--out", out]
        p = run(args, tmp)
        text = p.stdout + p.stderr
        comm = re.search(r"communication per step: (\d+) of (\d+) \(phase, group, op\) equal the model; (\d+) B measured, (\d+) B modelled", text)
        mem = "equal on every rank" in text and re.search(r"kept peak (\d+) B on rank 0, model (\d+) B", text)
        final = re.search(r"final loss (\S+)", text)
        losses[name] = final.group(1) if final else None
        times = re.findall(r"step +\d+ +loss \S+ +grad-norm \S+ +(\S+ ms)", text)
        ok = p.returncode == 0 and comm and comm.group(1) == comm.group(2) and comm.group(3) == comm.group(4) and \
            mem and mem.group(1) == mem.group(2)
        if ok:
            with h5py.File(out, "r") as f:
                attrs = f["runs"][sorted(f["runs"])[-1]].attrs
                ok = attrs["provenance"] == b"simulated" and attrs["simgrid_version"].startswith(b"SimGrid") and \
                    b"--cfg=network/model:CM02" in attrs["simulation_settings"] and attrs["world_size"] == 64
                # The links the steps used (simulate/link_traffic.hpp): the platform's own links,
                # every GPU's NVLink both ways among them; shared and contended bytes within
                # each link's; the summary printed.
                links = f["runs"][sorted(f["runs"])[-1]]["links"][:]
                # What rank 0's kernels were charged per step, by kind (simulate/kernel_tally.hpp):
                # GEMMs, the norms and the attention core among them, every kind called, and their
                # seconds within rank 0's simulated step.
                kernels = f["runs"][sorted(f["runs"])[-1]]["kernels"][:]
                step_s = min(float(t) for t in f["runs"][sorted(f["runs"])[-1]]["steps"]["seconds"])
            kinds = {k.decode() for k in kernels["kind"]}
            kernels_ok = {"gemm", "layernorm_apply", "attention_forward", "adamw_update"} <= kinds and \
                (kernels["calls"] > 0).all() and (kernels["bytes"] > 0).all() and \
                0 < float(kernels["seconds"].sum()) <= step_s and "simulated kernels on rank 0, per step: " in text
            if not kernels_ok:
                print(f"      kernels table: {sorted(kinds)}, {float(kernels['seconds'].sum())} s charged per step "
                      f"against a {step_s} s step; summary printed: {'simulated kernels on rank 0' in text}")
            ok = ok and kernels_ok
            names = {n.decode() for n in links["link"]}
            nvlinks = {f"n{n}-gpu{g}-nvlink_{d}" for n in range(8) for g in range(8) for d in ("UP", "DOWN")}
            pattern = r"n\d+-(gpu\d+-nvlink|nic\d+)_(UP|DOWN)|rail\d+-uplink_(UP|DOWN)"
            links_ok = nvlinks <= names and all(re.fullmatch(pattern, n) for n in names) and \
                (links["contended_bytes"] <= links["shared_bytes"] * (1 + 1e-9) + 1e-6).all() and \
                (links["shared_bytes"] <= links["bytes"] * (1 + 1e-9)).all() and "simulated links: " in text
            if not links_ok:
                print(f"      links table: {sorted(names)[:8]}... ; summary printed: {'simulated links: ' in text}")
            ok = ok and links_ok
        if ok and name == "2d":
            # Determinism: the same command again, the same simulated times — and without the
            # preloads that only speed the simulator up (the CPU-clock stub, TCMalloc).
            again = run(args[:-1] + [os.path.join(tmp, "again.h5")], tmp, env={"MDTP_SIMULATE_SPEED_PRELOADS": "0"})
            def step_seconds(path):
                with h5py.File(path, "r") as f:
                    return [float(t) for t in f["runs"][sorted(f["runs"])[-1]]["steps"]["seconds"]]
            first, second = step_seconds(out), step_seconds(os.path.join(tmp, "again.h5"))
            def table(path, name):
                with h5py.File(path, "r") as f:
                    return f["runs"][sorted(f["runs"])[-1]][name][:].tolist()
            ok = again.returncode == 0 and len(first) == 2 and first == second and \
                all(table(out, t) == table(os.path.join(tmp, "again.h5"), t) for t in ("links", "kernels"))
            print(f"      2d twice, the second without the speed preloads: simulated step seconds {first} and "
                  f"{second}, the links' and kernels' tables the same")
            # Synthetic values: tensors that hold nothing, kernels charged and not run — the same
            # simulated times to the last digit, the same ledger and memory, no loss.
            synthetic_out = os.path.join(tmp, "synthetic.h5")
            syn = run(args[:2] + args[2:4] + ["--values", "synthetic"] + args[4:-1] + [synthetic_out], tmp)
            syn_text = syn.stdout + syn.stderr
            syn_comm = re.search(r"communication per step: (\d+) of (\d+) \(phase, group, op\) equal the model; "
                                 r"(\d+) B measured, (\d+) B modelled", syn_text)
            syn_mem = re.search(r"kept peak (\d+) B on rank 0, model (\d+) B", syn_text)
            ok = ok and syn.returncode == 0 and syn_comm is not None and syn_comm.groups() == comm.groups() and \
                syn_mem is not None and syn_mem.groups() == mem.groups() and "equal on every rank" in syn_text and \
                "values synthetic (no loss" in syn_text
            if ok:
                third = step_seconds(synthetic_out)
                with h5py.File(synthetic_out, "r") as f:
                    run_attrs = f["runs"][sorted(f["runs"])[-1]].attrs
                    values_attr = run_attrs["simulation_values"]
                    settings = run_attrs["simulation_settings"]
                ok = third == first and values_attr == b"synthetic" and b"smpi/shared-malloc:global" in settings
                print(f"      2d with synthetic values: simulated step seconds {third}; ledger {syn_comm.group(3)} B, "
                      f"memory {syn_mem.group(1)} B, as with values")
            else:
                print(syn_text[-3000:])
        print(("ok    " if ok else "FAIL  ") + f"{name} on 64 simulated GPUs: " +
              (f"{comm.group(1)} of {comm.group(2)} keys equal the model, {comm.group(3)} B measured = modelled; "
               f"memory {mem.group(1)} B = model; step times {times}" if comm and mem else text[-2000:]))
        if not ok:
            print(text[-2000:])
            failures.append(name)

    # A simulated run that fails on some ranks only (2D attention needs whole sequences per row
    # block; b = 1 here) ends the simulation through MPI_Abort, after which smpirun exits 0:
    # `mdtp simulate` must still exit non-zero.
    p = run(["--cluster", "dgx-h100", "--gpus", "16", "--smpi-mdtp", smpi, "--", "train", "--tp-mode", "2d", "--tp",
             "4", "--pp", "2", "--micro-batches", "2", "--global-batch", "4", "--steps", "1"], tmp)
    ok = p.returncode == 2 and "attention needs whole sequences" in p.stderr
    print(("ok    " if ok else "FAIL  ") + f"a run failing on some simulated ranks: exit status {p.returncode}")
    if not ok:
        failures.append("failed simulated run exit status")

    # The TP-mode study's small form: every mode's ledger equals the model, beside the analytic step.
    out = os.path.join(tmp, "study.h5")
    p = subprocess.run([sys.executable, study, "--mdtp", mdtp, "--smpi-mdtp", smpi, "--sizes", "64", "--modes", "1d,2d,2.5d,3d",
                        "--layers", "4", "--steps", "1", "--out", out, "--plots", os.path.join(tmp, "study")],
                       cwd=tmp, capture_output=True, text=True, timeout=900)
    ok = p.returncode == 0 and os.path.exists(out)
    if ok:
        with h5py.File(out, "r") as f:
            rows = f["study"][:]
        ok = len(rows) == 4 and all(r["keys_equal"] == r["keys"] > 0 and r["bytes_measured"] == r["bytes_model"]
                                    and r["simulated_step_s"] > 0 and r["model_step_s"] > 0 for r in rows) and \
            os.path.exists(os.path.join(tmp, "study", "step_time.png"))
        print(("ok    " if ok else "FAIL  ") + "TP-mode study at 64 simulated GPUs: " + ", ".join(
            f"{r['mode'].decode()} {r['simulated_step_s'] * 1e3:.2f} ms simulated / {r['model_step_s'] * 1e3:.2f} ms "
            f"analytic, {int(r['keys_equal'])}/{int(r['keys'])} keys" for r in rows))
    else:
        print("FAIL  TP-mode study: " + (p.stderr or p.stdout)[-2000:])
    if not ok:
        failures.append("study")

    # The values are computed, not synthetic: every mode trains the same model to the same loss.
    print(f"final losses: {losses}")
    if len(set(losses.values())) != 1 or None in losses.values():
        failures.append("losses differ across modes")

if failures:
    print("FAILED:", failures)
    sys.exit(1)
print("all simulate checks passed")
