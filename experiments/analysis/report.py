#!/usr/bin/env python3
"""Plots and a markdown summary of an mdtp results file.

    report.py RESULTS.h5 --out DIR [--all]

Writes into DIR:
  bytes_per_mode.png   communication bytes per step and rank, measured vs modelled, per mode
  time_split.png       step time split into compute (kernels, timed directly) and the rest (waiting
                       on communication, scheduling), measured, beside the model's compute +
                       communication, per mode
  comm_time.png        communication time per (mode, phase): measured vs modelled, and with sync timing
                       the wait for the last peer (skew) as its own bar
  scaling.png          step time against world size per mode (only when several world sizes exist)
  calibration.png      time per call against size per collective, measured and fitted (calibrate runs)
  train_bytes.png,     the GPT training runs (train_report.py): bytes per phase, memory held vs the
  train_memory.png,    model, activation peaks (kept, and inside a step) vs the model, and the
  train_activations.png  pipeline timeline of each pipelined run
  timeline_*.png
  summary.md           the comparison tables (also printed), and with --plan the planner's ranking
By default the bench runs of the latest invocation (its batch_id) are reported; --all takes every
bench run of the file.  The scaling plot always uses every bench run.
Needs h5py, numpy and matplotlib (Debian: python3-h5py python3-numpy python3-matplotlib).
"""
from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mdtp_results  # noqa: E402
import train_report  # noqa: E402

import matplotlib  # noqa: E402
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MIB = 1024.0 * 1024.0


def sizes_of(run):
    s = run.tables["summary"][0]
    text = f"{s['layer']} H={s['hidden']}" + (f" F={s['ffn_hidden']}" if s["layer"] != "layernorm" else "")
    return text + f" B={s['global_rows']} {s['dtype']}"


def labels(runs):
    """x tick labels: the mesh, plus the sizes when they differ between the runs shown."""
    same = len({sizes_of(r) for r in runs}) == 1
    return [r.tables["summary"][0]["mesh"].replace(" (", "\n(").replace(" dp", "\ndp")
            + ("" if same else "\n" + sizes_of(r)) for r in runs]


def sizes_title(runs):
    sizes = {sizes_of(r) for r in runs}
    return f" — {sizes.pop()}" if len(sizes) == 1 else ""


def summary_rows(runs):
    return [r.tables["summary"][0] for r in runs]


def plot_bytes(runs, path):
    rows = summary_rows(runs)
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(rows)), 4.5))
    ax.bar(x - 0.2, [r["bytes_measured"] / MIB for r in rows], 0.4, label="measured (ledger)")
    ax.bar(x + 0.2, [r["bytes_model"] / MIB for r in rows], 0.4, label="model (plan_step)")
    ax.set_xticks(x, labels(runs), fontsize=8)
    ax.set_ylabel("MiB per step per rank (logical)")
    ax.set_title("Communication volume: measured vs modelled" + sizes_title(runs), fontsize=10)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def phase_row(run, phase):
    for r in run.tables["phases"]:
        if r["phase"] == phase:
            return r
    raise KeyError(phase)


def plot_time_split(runs, path):
    x = np.arange(len(runs))
    compute = np.array([phase_row(r, "step")["compute_s"] for r in runs]) * 1e3
    wall = np.array([phase_row(r, "step")["wall_s"] for r in runs]) * 1e3
    exposed = np.array([phase_row(r, "step")["exposed_s"] for r in runs]) * 1e3
    model_compute = np.array([phase_row(r, "step")["compute_model_s"] for r in runs]) * 1e3
    model_comm = np.array([phase_row(r, "step")["comm_model_s"] for r in runs]) * 1e3
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(runs)), 4.5))
    ax.bar(x - 0.2, compute, 0.4, label="compute (measured)", color="tab:blue")
    ax.bar(x - 0.2, exposed, 0.4, bottom=compute, label="not computing: comm. waits, scheduling (measured)",
           color="tab:orange")
    ax.bar(x + 0.2, model_compute, 0.4, label="compute (model)", color="tab:blue", alpha=0.45, hatch="//")
    ax.bar(x + 0.2, model_comm, 0.4, bottom=model_compute, label="communication (model)", color="tab:orange",
           alpha=0.45, hatch="//")
    ax.set_xticks(x, labels(runs), fontsize=8)
    ax.set_ylabel("ms per step (max over ranks)")
    for xi, (c, m) in enumerate(zip(model_compute, model_comm)):
        ax.annotate(f"{c + m:.2f}", (xi + 0.2, c + m), ha="center", va="bottom", fontsize=7)
    ax.set_title("Step time: compute and communication" + oversubscription_note(runs) + "\n" + sizes_title(runs)[3:],
                 fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def sync_timed(run):
    """True when the run timed its blocking collectives after a barrier (wait apart from transfer)."""
    return int(run.attrs.get("sync_timing", 0)) == 1


def phase_wait(run, phase):
    row = phase_row(run, phase)
    return float(row["wait_s"]) if "wait_s" in row.dtype.names else 0.0


def skew_markdown(runs):
    """Transfer and the wait for the last peer apart, per run (sync timing; older files lack it)."""
    lines = ["", "Communication split into the transfer and the wait for the last peer to arrive (skew), per step "
             "(max over ranks); the wait is measured only with sync timing (`--sync-timing`), without it every "
             "call's time is issue to completion, wait included.", "",
             "| mode / mesh | comm timing | transfer ms meas | transfer ms model | meas/model | wait (skew) ms |",
             "|---|---|---|---|---|---|"]
    for r in runs:
        s = r.tables["summary"][0]
        wait = s["wait_s"] if "wait_s" in s.dtype.names else 0.0
        timing = "sync (transfer after barrier)" if sync_timed(r) else "issue to completion"
        lines.append(f"| {s['mesh']} | {timing} | {s['comm_s'] * 1e3:.3f} | {s['comm_model_s'] * 1e3:.3f} | "
                     f"{s['comm_ratio']:.2f} | {wait * 1e3:.3f}{'' if sync_timed(r) else ' (not measured)'} |")
    return lines


def plot_comm_time(runs, path):
    phases = ["forward", "backward", "grad-sync"]
    fig, axes = plt.subplots(1, len(phases), figsize=(5 * len(phases), 4.2), sharey=True)
    x = np.arange(len(runs))
    for ax, phase in zip(axes, phases):
        synced = any(sync_timed(r) for r in runs)
        width, offsets = (0.27, (-0.27, 0.0)) if synced else (0.4, (-0.2, 0.2))
        ax.bar(x + offsets[0], [phase_row(r, phase)["comm_s"] * 1e3 for r in runs], width,
               label="measured transfer (sync timing)" if synced else "measured")
        ax.bar(x + offsets[1], [phase_row(r, phase)["comm_model_s"] * 1e3 for r in runs], width, label="model")
        if synced:  # skew: its own bar, never added to the transfer
            ax.bar(x + 0.27, [phase_wait(r, phase) * 1e3 for r in runs], width, label="wait for last peer (skew)")
        ax.set_xticks(x, [r.attrs["mode"] for r in runs], fontsize=8)
        ax.set_yscale("log")  # measured and modelled can be orders of magnitude apart (oversubscription)
        ax.set_title(phase)
    axes[0].set_ylabel("communication ms per step (log)")
    axes[0].legend()
    fig.suptitle("Communication time per phase: measured (max over ranks) vs α-β model")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_scaling(all_bench, path):
    worlds = sorted({int(r.attrs["world_size"]) for r in all_bench})
    if len(worlds) < 2:
        return False
    # Latest run per (mode, layer, sizes, world).
    latest = {}
    for r in all_bench:
        s = r.tables["summary"][0]
        latest[(r.attrs["mode"], s["layer"], s["hidden"], s["ffn_hidden"], s["rows"], int(s["world"]))] = r
    series = defaultdict(list)
    for (mode, layer, hidden, ffn, rows, world), r in sorted(latest.items()):
        series[(mode, layer, hidden, ffn, rows)].append((world, phase_row(r, "step")["wall_s"] * 1e3))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, points in series.items():
        if len(points) < 2:
            continue
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=f"{key[0]} {key[1]} H={key[2]}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("world size (ranks)")
    ax.set_ylabel("step ms (max over ranks)")
    ax.set_title("Scaling across world sizes")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def plot_calibration(calibrations, path):
    if not calibrations:
        return False
    run = calibrations[-1]
    sweep = run.tables["sweep"]
    ops = sorted(set(sweep["op"]))
    fig, axes = plt.subplots(1, len(ops), figsize=(4 * len(ops), 3.8), sharey=True, squeeze=False)
    for ax, op in zip(axes[0], ops):
        for group in sorted(set(sweep["group"])):
            sel = (sweep["op"] == op) & (sweep["group"] == group)
            if not sel.any():
                continue
            rows = sweep[sel]
            line, = ax.plot(rows["bytes"], rows["time_max_s"] * 1e6, marker=".",
                            label=f"{group} (n={rows['group_size'][0]})")
            ax.plot(rows["bytes"], rows["model_s"] * 1e6, linestyle="--", color=line.get_color())
            ax.plot(rows["bytes"], rows["formula_s"] * 1e6, linestyle=":", color=line.get_color())
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(op)
        ax.set_xlabel("bytes")
    axes[0][0].set_ylabel("µs per call, max over ranks\n(dashed: per-op fit, dotted: link α-β formula)")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"Calibration {run.name}" + (" — OVERSUBSCRIBED" if run.attrs.get("oversubscribed") else ""))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def oversubscription_note(runs):
    factor = max(float(r.attrs.get("oversubscription", 1.0)) for r in runs)
    return f" (oversubscribed ×{factor:g})" if factor > 1.0 else ""


def markdown_summary(runs, calibrations, path_h5):
    first = runs[0].attrs
    factor = max(float(r.attrs.get("oversubscription", 1.0)) for r in runs)
    lines = [f"# mdtp bench summary: {os.path.basename(path_h5)}", ""]
    lines.append(f"- runs: {', '.join(r.name for r in runs)} (batch {first.get('batch_id', '?')})")
    lines.append(f"- world: {first['world_size']} ranks on {first.get('hosts', '?')}; "
                 f"{first.get('local_ranks', '?')} ranks on {first.get('cores', '?')} cores "
                 f"(oversubscription {factor:g}); wait policy {first.get('wait_policy', '?')}")
    lines.append(f"- mdtp {first.get('mdtp_version', '?')} ({first.get('git_commit', '?')}), "
                 f"{first.get('compiler', '?')}, {first.get('mpi_library', '?')}, backend {first.get('backend', '?')}, "
                 f"dtype {first.get('dtype', '?')}")
    lines.append(f"- link parameters: {first.get('calibration', '?')}")
    if factor > 1.0:
        lines.append(f"- **oversubscribed (×{factor:g})**: more ranks than cores, so the measured times are dominated "
                     "by the OS scheduler, not by the algorithms; compare the bytes, and take the times as "
                     "a test of the machinery only")
    lines.append("")
    lines.append("| mode / mesh | layer | rows (global) | hidden | ffn | MiB/step meas | bytes meas/model | comm ms meas | "
                 "comm ms model | comm meas/model | compute ms meas | compute ms model | step ms meas | "
                 "step ms model | peak MiB | peak MiB model | check |")
    lines.append("|" + "---|" * 17)
    for r in runs:
        s = r.tables["summary"][0]
        ratio = s["bytes_ratio"]
        exact = "" if s["bytes_match"] else " (≠)"
        lines.append(
            f"| {s['mesh']} | {s['layer']} | {s['global_rows']} | {s['hidden']} | {s['ffn_hidden']} | "
            f"{s['bytes_measured'] / MIB:.3f} | {ratio:.3f}{exact} | {s['comm_s'] * 1e3:.3f} | "
            f"{s['comm_model_s'] * 1e3:.3f} | {s['comm_ratio']:.2f} | {s['compute_s'] * 1e3:.3f} | "
            f"{s['compute_model_s'] * 1e3:.3f} | {s['step_s'] * 1e3:.3f} | {s['step_model_s'] * 1e3:.3f} | "
            f"{s['peak_bytes'] / MIB:.2f} | {s['peak_model_bytes'] / MIB:.2f} | {s['check']} ({s['check_error']:.1e}) |")
    lines.append("")
    lines.append("Times are per step (forward + backward + grad-sync), the maximum over ranks averaged over the "
                 "timed repetitions; bytes are logical bytes per step and rank (nccl-tests conventions).  "
                 "'comm ms meas' adds up every collective from issue to completion: non-blocking calls overlap "
                 "compute, so it can exceed the step time.  'peak MiB' is the allocator's peak over the run, "
                 "communication buffers and workspaces included, beside the model of the same categories.")
    lines += skew_markdown(runs)
    used = used_calibration(runs, calibrations)
    if used is not None:
        lines += ["", f"Link parameters and GEMM rate of these runs: {used.name}", ""] + calibration_markdown(used)
    elif calibrations:
        lines += ["", f"(These runs used default link parameters; the latest calibration in the file, "
                      f"{calibrations[-1].name}, is shown for reference.)", ""] + calibration_markdown(calibrations[-1])
    return "\n".join(lines) + "\n"


def used_calibration(runs, calibrations):
    """The calibrate run the bench runs took their link parameters from, if it is in this file."""
    source = str(runs[0].attrs.get("calibration", ""))
    for run in calibrations:
        if f":/runs/{run.name}" in source:
            return run
    return None


def calibration_markdown(run):
    """The fitted parameters of a calibrate run, as markdown lines."""
    lines = [f"## Calibration {run.name}" + (" — OVERSUBSCRIBED, do not trust" if run.attrs.get("oversubscribed") else ""),
             ""]
    links = run.tables.get("link_params")
    if links is not None and len(links):
        lines += ["| link | α µs | β ns/byte | 1/β GB/s | points | rms rel. error |", "|---|---|---|---|---|---|"]
        for f in links:
            bw = 1.0 / f["beta_s_per_byte"] / 1e9 if f["beta_s_per_byte"] > 0 else float("inf")
            lines.append(f"| {f['link']} | {f['alpha_s'] * 1e6:.2f} | {f['beta_s_per_byte'] * 1e9:.4f} | {bw:.2f} | "
                         f"{f['points']} | {f['rms_rel_error']:.2f} |")
        lines.append("")
    fits = run.tables.get("collective_fits")
    if fits is not None and len(fits):
        lines += ["| op | n | regime | bytes from | α µs | β ns/byte | points | rms rel. error |",
                  "|---|---|---|---|---|---|---|---|"]
        for f in fits:
            lines.append(f"| {f['op']} | {f['group_size']} | {f['regime']} | {f['min_bytes']} | {f['alpha_s'] * 1e6:.2f} | "
                         f"{f['beta_s_per_byte'] * 1e9:.4f} | {f['points']} | {f['rms_rel_error']:.2f} |")
        lines.append("")
    gemm = run.tables.get("gemm_rates")
    if gemm is not None:
        for g in gemm:
            lines.append(f"- GEMM {g['dtype']} {g['m']}³: {g['flops_mean'] / 1e9:.1f} GFLOP/s per rank")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="results file (HDF5) written by mdtp bench / calibrate")
    parser.add_argument("--out", required=True, help="directory for the PNGs and summary.md")
    parser.add_argument("--all", action="store_true", help="report every bench run, not only the latest batch")
    parser.add_argument("--quiet", action="store_true", help="do not print summary.md")
    parser.add_argument("--plan", help="JSON written by `mdtp plan --json`: the ranking is added to summary.md")
    args = parser.parse_args(argv)

    runs = mdtp_results.load_runs(args.results)
    all_bench = [r for r in runs.values() if r.kind == "bench"]
    calibrations = [r for r in runs.values() if r.kind == "calibrate"]
    all_train = [r for r in runs.values() if r.kind == "train"]
    if not all_bench and not calibrations and not all_train:
        print(f"report.py: {args.results} holds no bench, calibrate or train runs", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    written = []
    if all_bench:
        bench = all_bench if args.all else list(mdtp_results.latest_batch(runs).values())
        bench.sort(key=lambda r: r.number)
        for name, plot in (("bytes_per_mode.png", plot_bytes), ("time_split.png", plot_time_split),
                           ("comm_time.png", plot_comm_time)):
            plot(bench, os.path.join(args.out, name))
            written.append(name)
        if plot_scaling(all_bench, os.path.join(args.out, "scaling.png")):
            written.append("scaling.png")
        text = markdown_summary(bench, calibrations, args.results)
    elif calibrations:
        text = "\n".join([f"# mdtp calibration: {os.path.basename(args.results)}", ""]
                         + calibration_markdown(calibrations[-1])) + "\n"
    else:
        text = f"# mdtp training runs: {os.path.basename(args.results)}\n"
    # The train runs of this invocation: those after its bench runs (all of them with --all).
    after = max((r.number for r in bench), default=0) if all_bench and not args.all else 0
    train = sorted((r for r in all_train if r.number > after), key=lambda r: r.number)
    lines, pictures = train_report.report(train, args.out, args.plan)
    if lines:
        text += "\n" + "\n".join(lines) + "\n"
    written += pictures
    if plot_calibration(calibrations, os.path.join(args.out, "calibration.png")):
        written.append("calibration.png")
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(text)
    written.append("summary.md")
    if not args.quiet:
        print(text)
    print(f"report.py: wrote {', '.join(written)} to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
