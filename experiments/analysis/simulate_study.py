#!/usr/bin/env python3
"""The TP-mode study on a simulated cluster: mdtp's real engines under SimGrid (docs/simulate.md).

    simulate_study.py [--mdtp build/mdtp] [--smpi-mdtp FILE] [--cluster dgx-h100] [--sizes 64,256,1024]
                      [--modes 1d,2d,2.5d,3d] [--pp 4] [--micro-batches 4] [--micro-batch-size 4]
                      [--layers 8]
                      [--hidden 64] [--heads 8] [--seq 32] [--steps 2] [--zero 3]
                      [--out results/simulate-study.h5] [--plots results/simulate-study]

For every size and mode: `mdtp simulate --cluster C --gpus N -- train ...` with a pipeline of --pp
stages and ZeRO --zero (1D tp 8 = one node, 2D tp 4 = a 2 x 2 grid, 2.5D tp 8 with depth 2, 3D tp 8
= 2 x 2 x 2; dp = N / (tp x pp); b sequences per micro-batch, so B = dp x m x b: the 2D, 2.5D and
3D grids split a micro-batch's sequences over their row blocks, 2 here), then `mdtp cost` on
the same configuration and cluster for the analytic step.  Each run's own results (ledger, memory,
pipeline, provenance 'simulated') go to RUNDIR/<mode>-<N>.h5 beside --out.

--out gets one row per run in the dataset `study`: the simulated step time (the last step), the
analytic step and its parts, the ledger's (phase, group, op) keys equal to the model and the bytes
of the last step on both sides, the simulator's own cost: wall seconds and the peak PSS of its
process (all ranks live in one process; PSS, not maxrss), and which links its steps shared (from
its `links` table: the bytes on NVLink, NICs and rail uplinks, the fraction of them moved beside
another pair's transfer and while the link was asked more than its bandwidth, and the link with
the most such contended bytes). The plots: simulated vs analytic step time
per mode against GPUs, wall time and PSS against simulated ranks, and the links' shared and
contended shares per run (links.png).

Token data: random ids (seeded) in a file of exactly the rows one step needs, since the shipped
corpus holds 228 rows of 32 tokens and dp x m outgrows it at a thousand GPUs.
Needs h5py, numpy and matplotlib (Debian: python3-h5py python3-numpy python3-matplotlib).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import h5py
import numpy as np

# The tensor-parallel mesh of each mode: (flags, tp).
MODES = {
    "1d": (["--tp-mode", "1d", "--tp", "8"], 8),
    "1d-sp": (["--tp-mode", "1d-sp", "--tp", "8"], 8),
    "2d": (["--tp-mode", "2d", "--tp", "4"], 4),
    "2.5d": (["--tp-mode", "2.5d", "--tp", "8", "--tp-depth", "2"], 8),
    "3d": (["--tp-mode", "3d", "--tp", "8"], 8),
}


def fail(message: str) -> None:
    print(f"simulate_study.py: error: {message}", file=sys.stderr)
    sys.exit(2)


def pss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def descendants(pid: int) -> list[int]:
    """Every process below pid (smpirun runs the simulator, smpimain, as a child)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def run_measured(command: list[str], log_path: str) -> tuple[int, float, int]:
    """Runs command; returns (exit status, wall seconds, peak PSS summed over its processes)."""
    start = time.monotonic()
    peak = 0
    with open(log_path, "w") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        while proc.poll() is None:
            peak = max(peak, sum(pss_bytes(p) for p in [proc.pid] + descendants(proc.pid)))
            time.sleep(0.5)
    return proc.returncode, time.monotonic() - start, peak


def write_tokens(path: str, rows: int, seq: int, vocab: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, size=(rows, seq + 1), dtype=np.int32)
    with h5py.File(path, "w") as f:
        f["inputs"] = ids[:, :seq]
        f["targets"] = ids[:, 1:]
        f.attrs["vocab_size"] = vocab


def last_step(results: str) -> dict:
    with h5py.File(results, "r") as f:
        run = f["runs"][sorted(f["runs"].keys())[-1]]
        steps = run["steps"][:]
        ledger = run["ledger"][:]
        step = int(steps["step"].max())
        rows = ledger[ledger["step"] == step]
        equal = int(np.sum(rows["logical_bytes"] == rows["model_logical_bytes"]))
        return {
            "simulated_step_s": float(steps["seconds"][steps["step"] == step][0]),
            "loss": float(steps["loss"][steps["step"] == step][0]),
            "keys_equal": equal,
            "keys": int(len(rows)),
            "bytes_measured": float(rows["logical_bytes"].sum()),
            "bytes_model": float(rows["model_logical_bytes"].sum()),
            "provenance": run.attrs["provenance"].decode(),
            # What rank 0's kernels were charged per step (simulate/kernel_tally.hpp): its compute.
            "charged_kernels_s": float(run["kernels"]["seconds"].sum()) if "kernels" in run else 0.0,
            **shared_links(run),
        }


def link_kind(name: str) -> str:
    """The fabric a link of the generated platform belongs to, from its id (simulate/platform.hpp)."""
    return "nvlink" if "-nvlink" in name else "nic" if "-nic" in name else "uplink" if "-uplink" in name else "other"


def shared_links(run) -> dict:
    """What the run's `links` table says (simulate/link_traffic.hpp), over its steps: per fabric, the
    share of the bytes whose transfer started while the link carried another flow (shared) and while
    it was full (contended), and the link with the most contended bytes."""
    out = {"contended_link": "", "contended_link_fraction": 0.0}
    for kind in ("nvlink", "nic", "uplink"):
        out[f"bytes_{kind}"] = out[f"shared_{kind}"] = out[f"contended_{kind}"] = 0.0
    if "links" not in run:
        return out
    links = run["links"][:]
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in links["link"]]
    for kind in ("nvlink", "nic", "uplink"):
        mine = np.array([link_kind(n) == kind for n in names], dtype=bool)
        total = float(links["bytes"][mine].sum())
        out[f"bytes_{kind}"] = total
        if total > 0:
            out[f"shared_{kind}"] = float(links["shared_bytes"][mine].sum()) / total
            out[f"contended_{kind}"] = float(links["contended_bytes"][mine].sum()) / total
    # The link named: the most contended bytes among those with at least 1 % of theirs contended
    # (as `mdtp train` names them: a few bytes of bookkeeping beside a transfer are not the story).
    named = (links["bytes"] > 0) & (links["contended_bytes"] >= 0.01 * links["bytes"]) & (links["contended_bytes"] > 0)
    if named.any():
        top = int(np.argmax(np.where(named, links["contended_bytes"], -1.0)))
        out["contended_link"] = names[top]
        out["contended_link_fraction"] = float(links["contended_bytes"][top] / links["bytes"][top])
    return out


def analytic_step(args, mode_flags: list[str], gpus: int, pp: int, batch: int) -> dict:
    # The simulated ranks run mdtp's engine: its own collectives (one ring per group, all-reduce
    # included: NCCL's tree and channels are not among them), 1D's backward all-reduces waited for
    # before the weight gradient, each backward's input gradient sent before its weight pass, the
    # gradients reduced after backward below ZeRO-2 (rounds under it from ZeRO-2), and its own
    # unfused kernels (each charged).  The model prices the same.
    dp_overlap = [] if args.zero >= 2 else ["--no-dp-overlap"]
    command = [args.mdtp, "cost", "--cluster", args.cluster, "--gpus", str(gpus), "--own-collectives",
               "--no-tp-backward-overlap", "--input-grad-first", *dp_overlap, "--engine-kernels", *mode_flags,
               "--pp", str(pp),
               "--zero", str(args.zero), "--dtype", args.dtype, "--micro-batches", str(args.micro_batches),
               "--layers", str(args.layers),
               "--hidden", str(args.hidden), "--heads", str(args.heads), "--seq", str(args.seq), "--vocab",
               str(args.vocab), "--global-batch", str(batch), "--json"]
    p = subprocess.run(command, capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"{' '.join(command)}: {p.stderr.strip()}")
    d = json.loads(p.stdout)
    t = d["time"]
    return {"model_step_s": d["step_s"], "model_tp_s": t["tp_comm_s"], "model_dp_s": t["dp_comm_s"],
            "model_pp_s": t["pp_comm_s"], "model_bubble_s": t["bubble_s"], "model_compute_s": t["compute_s"]}


def plot(rows: list[dict], plots: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(plots, exist_ok=True)

    def save(fig, name: str) -> None:
        fig.tight_layout()
        fig.savefig(os.path.join(plots, name), dpi=120)
        plt.close(fig)

    modes = sorted({r["mode"] for r in rows})
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, mode in enumerate(modes):
        mine = sorted((r for r in rows if r["mode"] == mode), key=lambda r: r["gpus"])
        g = [r["gpus"] for r in mine]
        ax.plot(g, [r["simulated_step_s"] * 1e3 for r in mine], "o-", color=f"C{i}", label=f"{mode} simulated")
        ax.plot(g, [r["model_step_s"] * 1e3 for r in mine], "x--", color=f"C{i}", label=f"{mode} analytic")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("GPUs (simulated)")
    ax.set_ylabel("step time, ms")
    ax.set_title("TP modes on a simulated cluster: SimGrid vs the analytic model")
    ax.legend(fontsize=8)
    save(fig, "step_time.png")

    fig, ax1 = plt.subplots(figsize=(7, 4.5))
    ax2 = ax1.twinx()
    for i, mode in enumerate(modes):
        mine = sorted((r for r in rows if r["mode"] == mode), key=lambda r: r["gpus"])
        g = [r["gpus"] for r in mine]
        ax1.plot(g, [r["wall_s"] for r in mine], "o-", color=f"C{i}", label=f"{mode} wall")
        ax2.plot(g, [r["pss_bytes"] / 2**30 for r in mine], "s:", color=f"C{i}", label=f"{mode} PSS")
    ax1.set_xscale("log", base=2)
    ax1.set_xlabel("simulated ranks")
    ax1.set_ylabel("wall time of the simulation, s (o)")
    ax2.set_ylabel("peak PSS, GiB (s)")
    ax1.set_title("What the simulation costs on this machine")
    ax1.legend(fontsize=8, loc="upper left")
    save(fig, "simulator_cost.png")

    # Which links the steps shared: per run, the share of the NVLink and NIC bytes moved beside
    # another pair's transfer (light) and while the link was asked more than its bandwidth (dark).
    runs = sorted(rows, key=lambda r: (r["gpus"], r["mode"]))
    fig, ax = plt.subplots(figsize=(max(7, 0.9 * len(runs)), 4.5))
    x = np.arange(len(runs))
    for offset, kind, label, color in ((-0.2, "nvlink", "NVLink", "C0"), (0.2, "nic", "NICs", "C1")):
        ax.bar(x + offset, [100 * r["shared_" + kind] for r in runs], 0.4, color=color, alpha=0.35,
               label=f"{label}: shared")
        ax.bar(x + offset, [100 * r["contended_" + kind] for r in runs], 0.4, color=color,
               label=f"{label}: contended")
    ax.set_xticks(x)
    ax.set_xticklabels([f"{r['mode']}\n{r['gpus']}" for r in runs], fontsize=8)
    ax.set_ylabel("% of the links' bytes")
    ax.set_title("Links shared by the simulated steps (lower bounds)")
    ax.legend(fontsize=8)
    save(fig, "links.png")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mdtp", default="build/mdtp")
    ap.add_argument("--smpi-mdtp", default="", help="the SMPI build (default: mdtp simulate's, BUILD-smpi/mdtp)")
    ap.add_argument("--cluster", default="dgx-h100")
    ap.add_argument("--sizes", default="64,256,1024")
    ap.add_argument("--modes", default="1d,2d,2.5d,3d")
    ap.add_argument("--pp", type=int, default=4)
    ap.add_argument("--micro-batches", type=int, default=4)
    ap.add_argument("--micro-batch-size", type=int, default=4)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--zero", type=int, default=3)
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16", "f16"])
    ap.add_argument("--values", default="real", choices=["real", "synthetic"],
                    help="synthetic: tensors that hold nothing, kernels charged and not run (models of realistic size)")
    ap.add_argument("--out", default="results/simulate-study.h5")
    ap.add_argument("--plots", default="results/simulate-study")
    args = ap.parse_args()

    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            fail(f"--modes: unknown mode '{m}'; expected some of {','.join(MODES)}")
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s]
    except ValueError:
        fail(f"--sizes must be comma-separated GPU counts; got '{args.sizes}'")
    for n in sizes:
        for m in modes:
            tp = MODES[m][1]
            if n % (tp * args.pp) != 0:
                fail(f"--sizes: {n} GPUs do not split into tp {tp} x pp {args.pp} for mode {m}")
    if not os.access(args.mdtp, os.X_OK):
        fail(f"--mdtp {args.mdtp} is not an executable (build it: ./quickstart.sh simulate)")
    if os.path.exists(args.out):
        fail(f"--out {args.out} exists; name a new file (runs are never overwritten)")
    run_dir = os.path.splitext(args.out)[0] + "-runs"
    os.makedirs(run_dir, exist_ok=True)

    rows = []
    for n in sizes:
        for m in modes:
            flags, tp = MODES[m]
            dp = n // (tp * args.pp)
            batch = dp * args.micro_batches * args.micro_batch_size
            tokens = os.path.join(run_dir, f"tokens-{batch}x{args.seq}.h5")
            if not os.path.exists(tokens):
                write_tokens(tokens, batch, args.seq, args.vocab, seed=1234)
            results = os.path.join(run_dir, f"{m}-{n}.h5")
            if os.path.exists(results):
                os.remove(results)
            smpi = ["--smpi-mdtp", args.smpi_mdtp] if args.smpi_mdtp else []
            command = [args.mdtp, "simulate", "--cluster", args.cluster, "--gpus", str(n), *smpi, "--values",
                       args.values, "--", "train", *flags,
                       "--pp", str(args.pp), "--zero", str(args.zero), "--dtype", args.dtype,
                       "--micro-batches", str(args.micro_batches),
                       "--steps", str(args.steps), "--layers", str(args.layers), "--hidden", str(args.hidden),
                       "--heads", str(args.heads), "--seq", str(args.seq), "--global-batch", str(batch), "--data",
                       tokens, "--out", results]
            print(f"== {m} on {n} simulated GPUs (tp {tp}, pp {args.pp}, dp {dp}, m {args.micro_batches})", flush=True)
            status, wall, pss = run_measured(command, results + ".log")
            if status != 0 or not os.path.exists(results):
                fail(f"{' '.join(command)} exited {status}; its output is in {results}.log")
            row = {"gpus": n, "mode": m, "tp": tp, "pp": args.pp, "dp": dp, "wall_s": wall, "pss_bytes": pss,
                   **last_step(results), **analytic_step(args, flags, n, args.pp, batch)}
            rows.append(row)
            print(f"   simulated step {row['simulated_step_s'] * 1e3:.3f} ms, analytic {row['model_step_s'] * 1e3:.3f} ms; "
                  f"ledger = model on {row['keys_equal']} of {row['keys']} keys "
                  f"({row['bytes_measured']:.0f} B vs {row['bytes_model']:.0f} B); "
                  f"simulator {wall:.1f} s wall, {pss / 2**20:.0f} MiB PSS", flush=True)
            print("   links, share of their bytes moved beside another pair's transfer / while the link was asked "
                  "more than its bandwidth: "
                  + ", ".join(f"{label} {100 * row['shared_' + kind]:.0f} / {100 * row['contended_' + kind]:.0f} %"
                              if row["bytes_" + kind] > 0 else f"{label} idle"
                              for kind, label in (("nvlink", "NVLink"), ("nic", "NICs"), ("uplink", "rail uplinks")))
                  + (f"; most contended: {row['contended_link']} ({100 * row['contended_link_fraction']:.0f} % of its "
                     f"bytes)" if row["contended_link"] else ""), flush=True)

    names = ["gpus", "mode", "tp", "pp", "dp", "simulated_step_s", "model_step_s", "model_tp_s", "model_dp_s",
             "model_pp_s", "model_bubble_s", "model_compute_s", "charged_kernels_s", "keys_equal", "keys", "bytes_measured", "bytes_model",
             "loss", "wall_s", "pss_bytes", "bytes_nvlink", "bytes_nic", "bytes_uplink", "shared_nvlink", "shared_nic", "shared_uplink", "contended_nvlink",
             "contended_nic", "contended_uplink", "contended_link", "contended_link_fraction"]
    text = {"mode": "S8", "contended_link": "S40"}
    dtype = [(k, text.get(k, "f8")) for k in names]
    table = np.array([tuple(r[k].encode() if k in text else r[k] for k in names) for r in rows], dtype=dtype)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with h5py.File(args.out, "w") as f:
        f["study"] = table
        f.attrs["cluster"] = args.cluster
        f.attrs["command_line"] = " ".join(sys.argv)
        f.attrs["provenance"] = "simulated"
        f.attrs["values"] = args.values
        f.attrs["dtype"] = args.dtype
        f.attrs["runs"] = run_dir
    plot(rows, args.plots)
    print(f"study: {args.out} (dataset 'study'), plots in {args.plots}/")


if __name__ == "__main__":
    main()
