"""The training part of the main job's report: `mdtp train` runs side by side.

    import train_report
    lines, pictures = train_report.report(train_runs, out_dir, plan_json=None)

For each run: its configuration (mode, tp, pp, dp, schedule, ZeRO stage), final loss, step time
and set-up time (model and optimizer built); communication bytes per step and rank by phase (and, where the run recorded the cost model
beside the ledger, whether they agree to the byte); bytes held per memory category on the busiest
rank beside the ZeRO bucket plan's model, and the kept-activation peak beside its model; for pipelined runs, the measured bubble beside the
schedule's.  Pictures: train_bytes.png (bytes per phase per configuration), train_memory.png (held
vs model per category), train_activations.png (the kept-activation peak and the allocator's peak
inside a step, each beside its model) and one pipeline timeline per pipelined run (timeline.py), measured beside
the same order replayed at unit pass times.  With `plan_json` (what `mdtp plan --json` printed), the planner's ranking.
"""
from __future__ import annotations

import json
import os
from collections import defaultdict

import numpy as np

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MIB = 1024.0 * 1024.0
MODELLED_CATEGORIES = ("parameters", "gradients", "optimizer_state", "master_weights")
# Rows of the memory table whose model is a peak over the run, not what is held after it.
PEAK_ROWS = ("activations_kept", "activations_in_step", "parameters_in_pass", "gradients_in_step")


def describe(run):
    a = run.attrs
    text = f"{a.get('mode', '?')} tp{a.get('tp', 1)}"
    if int(a.get("pp", 1)) > 1:
        text += f" pp{a['pp']} {a.get('schedule', '')} m{a.get('micro_batches', 1)}"
    text += f" dp{a.get('dp', 1)}"
    if int(a.get("zero_stage", 0)) > 0:
        text += f" zero{a['zero_stage']}" + (" offload" if int(a.get("zero_offload", 0)) else "")
    return text


def last_step(table):
    """The rows of the run's last recorded step."""
    if table is None or len(table) == 0:
        return table
    return table[table["step"] == table["step"].max()]


def bytes_by_phase(run):
    """{phase: logical bytes per step on the busiest rank} for the run's last step."""
    out = defaultdict(float)
    for row in last_step(run.tables.get("ledger")):
        out[row["phase"]] += float(row["logical_bytes"])
    return dict(out)


def model_agreement(run):
    """'equal', 'DIFFERS (n keys)' or None when the run did not record the model beside the ledger."""
    ledger = last_step(run.tables.get("ledger"))
    if ledger is None or len(ledger) == 0 or "model_logical_bytes" not in ledger.dtype.names:
        return None
    differ = int(np.sum(ledger["model_logical_bytes"] != ledger["logical_bytes"]))
    return "equal" if differ == 0 else f"DIFFERS ({differ} keys)"


def comm_split(run):
    """(transfer s, wait s, synchronised calls) of the run's last step, summed over the ledger's keys
    (max over ranks per key); None when the ledger table predates the wait columns."""
    ledger = last_step(run.tables.get("ledger"))
    if ledger is None or len(ledger) == 0 or "wait_max" not in ledger.dtype.names:
        return None
    return (float(np.sum(ledger["seconds_max"])), float(np.sum(ledger["wait_max"])),
            int(np.sum(ledger["synchronised_calls"])))


def memory_rows(run):
    """{category: (held, model)} on the rank holding most in total, modelled categories only."""
    memory = run.tables.get("memory")
    if memory is None or len(memory) == 0:
        return {}
    totals = defaultdict(int)
    for row in memory:
        totals[int(row["rank"])] += int(row["held_bytes"])
    busiest = max(totals, key=totals.get)
    return {row["category"]: (int(row["held_bytes"]), int(row["model_bytes"]))
            for row in memory if int(row["rank"]) == busiest and row["category"] in MODELLED_CATEGORIES}


def memory_agreement(run):
    memory = run.tables.get("memory")
    if memory is None or len(memory) == 0:
        return "—"
    modelled = memory[memory["model_bytes"] >= 0]
    # activations_kept, activations_in_step, parameters_in_pass and gradients_in_step are peaks
    # (docs/memory.md): their peak_bytes is what is modelled; the categories' held_bytes after the
    # last step otherwise.
    peaks = np.array([(c.decode() if isinstance(c, bytes) else str(c)) in PEAK_ROWS
                      for c in modelled["category"]], dtype=bool)
    measured = np.where(peaks, modelled["peak_bytes"], modelled["held_bytes"])
    differ = int(np.sum(measured != modelled["model_bytes"]))
    return "equal on every rank" if differ == 0 else f"DIFFERS on {differ} (rank, category) rows"


def setup_ms(run):
    """Building the model and the optimizer (slowest rank), as text; '—' for runs that predate it."""
    a = run.attrs
    if "setup_model_seconds" not in a:
        return "—"
    return f"{(float(a['setup_model_seconds']) + float(a['setup_optimizer_seconds'])) * 1e3:.1f}"


def bubble(run):
    """(measured, model) bubble fraction averaged over stages of the last step, or None."""
    pipeline = last_step(run.tables.get("pipeline"))
    if pipeline is None or len(pipeline) == 0 or int(run.attrs.get("pp", 1)) < 2:
        return None
    return float(np.mean(pipeline["bubble_measured"])), float(np.mean(pipeline["bubble_model"]))


def per_run_axes(runs):
    """A figure with one x position per run."""
    return plt.subplots(figsize=(max(6, 1.4 * len(runs)), 4.5))


def save_per_run(fig, ax, runs, ylabel, title, legend_size, path):
    """Labels each run's x position with its configuration, then writes and closes the figure."""
    ax.set_xticks(range(len(runs)))
    ax.set_xticklabels([describe(r).replace(" dp", "\ndp").replace(" pp", "\npp") for r in runs], fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=legend_size)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_bytes(runs, path):
    phases = sorted({p for r in runs for p in bytes_by_phase(r)})
    fig, ax = per_run_axes(runs)
    bottom = np.zeros(len(runs))
    for phase in phases:
        values = np.array([bytes_by_phase(r).get(phase, 0.0) / MIB for r in runs])
        ax.bar(range(len(runs)), values, bottom=bottom, label=phase)
        bottom += values
    save_per_run(fig, ax, runs, "MiB per step, busiest rank (logical)", "GPT training step: communication by phase", 8,
                 path)


def plot_memory(runs, path):
    fig, ax = per_run_axes(runs)
    width = 0.8 / len(MODELLED_CATEGORIES)
    for k, category in enumerate(MODELLED_CATEGORIES):
        held = [memory_rows(r).get(category, (0, 0))[0] / MIB for r in runs]
        model = [memory_rows(r).get(category, (0, 0))[1] / MIB for r in runs]
        x = np.arange(len(runs)) + (k - 1.5) * width
        ax.bar(x, held, width, label=f"{category} (held)")
        ax.scatter(x, model, marker="_", s=200, color="black", zorder=3,
                   label="bucket-plan model" if k == 0 else None)
    save_per_run(fig, ax, runs, "MiB held after the step, busiest rank", "Memory per category: allocator vs model", 7,
                 path)


def activation_peaks(run):
    """(kept, kept model, in step, in-step model or None) on the rank with the highest peak inside
    a step; None for runs that predate the activations_in_step row."""
    memory = run.tables.get("memory")
    if memory is None or len(memory) == 0:
        return None
    names = np.array([(c.decode() if isinstance(c, bytes) else str(c)) for c in memory["category"]])
    in_step, kept = memory[names == "activations_in_step"], memory[names == "activations_kept"]
    if len(in_step) == 0:
        return None
    i = int(np.argmax(in_step["peak_bytes"]))
    k = kept[kept["rank"] == in_step["rank"][i]][0]
    model = int(in_step["model_bytes"][i])
    return (int(k["peak_bytes"]), int(k["model_bytes"]), int(in_step["peak_bytes"][i]),
            model if model >= 0 else None)


def plot_activations(runs, path):
    """Per run, the kept-activation peak and the allocator's peak inside a step (kept + working
    set), each with its model; pipelined runs have no model of the latter (docs/memory.md)."""
    fig, ax = per_run_axes(runs)
    peaks = [activation_peaks(r) for r in runs]
    bars = [("kept (at pass ends)", 0, 1), ("inside a step (kept + working set)", 2, 3)]
    for k, (label, value, model) in enumerate(bars):
        x = np.arange(len(runs)) + (k - 0.5) * 0.4
        ax.bar(x, [p[value] / MIB if p else 0 for p in peaks], 0.4, label=label)
        points = [(xi, p[model] / MIB) for xi, p in zip(x, peaks) if p and p[model] is not None]
        if points:
            ax.scatter(*zip(*points), marker="_", s=200, color="black", zorder=3, label="model" if k == 0 else None)
    save_per_run(fig, ax, runs, "MiB, the rank with the highest peak", "Activation memory: allocator vs model", 7,
                 path)


def plot_losses(runs, path):
    """Every run's loss per step (a 16-bit run beside f32 shows what the precision costs); an f16
    run's overflow-skipped steps are marked where the loss scale backed off."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for r in runs:
        steps = r.tables["steps"]
        dtype = r.attrs.get("dtype", "")
        dtype = dtype.decode() if isinstance(dtype, bytes) else str(dtype)
        label = f"{r.name}: {describe(r)} {dtype} seed {r.attrs.get('seed', '?')}"
        ax.plot(steps["step"], steps["loss"], linewidth=1, label=label)
        if "loss_scale" in steps.dtype.names and "grad_norm" in steps.dtype.names:
            skipped = ~np.isfinite(steps["grad_norm"])
            if skipped.any():
                ax.scatter(steps["step"][skipped], steps["loss"][skipped], marker="x", s=12, color="red", zorder=3)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title("Training loss (x: steps skipped for an f16 overflow or a non-finite gradient)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plan_lines(plan_json, top=8):
    with open(plan_json) as f:
        plan = json.load(f)
    configs = [c for c in plan.get("configs", []) if c.get("fits", True)]
    model = configs[0]["config"]["model"] if configs else {}
    lines = [f"## Planner: {model.get('layers')} layers, hidden {model.get('hidden')}, {model.get('heads')} heads, "
             f"seq {model.get('seq')}, vocabulary {model.get('vocab')} on {plan.get('cluster')} "
             f"({len(configs)} feasible configurations, best {min(top, len(configs))} shown)", "",
             "| rank | configuration | step s | tokens/s | TFLOP/s per GPU | MFU | memory per GPU GiB |",
             "|---|---|---|---|---|---|---|"]
    for i, c in enumerate(configs[:top]):
        lines.append(f"| {i + 1} | {c['description']} | {c['step_s']:.4f} | {c['tokens_per_s']:.0f} | "
                     f"{c['tflops_per_gpu']:.1f} | {c['mfu']:.3f} | {c['memory_per_gpu_bytes'] / 2**30:.2f} |")
    return lines + [""]


def report(runs, out_dir, plan_json=None):
    """Markdown lines and the names of the pictures written for these train runs."""
    lines, pictures = [], []
    if runs:
        oversubscribed = any(int(r.attrs.get("oversubscribed", 0)) for r in runs)
        lines += ["## GPT training runs", ""]
        if oversubscribed:
            lines += ["Ranks were oversubscribed: step times measure the OS scheduler as much as the algorithms; "
                      "bytes and memory are exact regardless.", ""]
        lines += ["| run | configuration | final loss | step ms | set-up ms | MiB/step (busiest rank) | bytes vs model | "
                  "memory vs model | bubble measured / model |", "|---|---|---|---|---|---|---|---|---|"]
        for r in runs:
            steps = r.tables["steps"]
            b = bubble(r)
            agreement = model_agreement(r)
            lines.append(f"| {r.name} | {describe(r)} | {steps['loss'][-1]:.6f} | {steps['seconds'][-1] * 1e3:.1f} | "
                         f"{setup_ms(r)} | {sum(bytes_by_phase(r).values()) / MIB:.3f} | "
                         f"{agreement if agreement else 'not recorded'} | {memory_agreement(r)} | "
                         f"{f'{b[0]:.2f} / {b[1]:.2f}' if b else '—'} |")
        lines.append("")
        lines += ["step ms: the last step's wall time on the slowest rank (forward, backward, the gradient "
                  "reduction and the update; a gradient dump excluded); set-up ms: building the model and the "
                  "optimizer, slowest rank.  MiB/step: the logical bytes of the busiest rank's collectives in the "
                  "last step.  Memory vs model covers the categories the model predicts, on every rank.", ""]
        # Skew apart from transfer: the wait for the last peer is measured only under --sync-timing;
        # without it each call's seconds run from issue to completion, waiting included.
        lines += ["Communication of the last step: transfer and the wait for the last peer (skew), apart.", "",
                  "| run | comm timing | transfer ms | wait (skew) ms | synchronised calls |", "|---|---|---|---|---|"]
        for r in runs:
            split = comm_split(r)
            if split is None:
                lines.append(f"| {r.name} | not recorded | — | — | — |")
                continue
            transfer, wait, synced = split
            timing = "sync (transfer after barrier)" if synced > 0 else "issue to completion"
            lines.append(f"| {r.name} | {timing} | {transfer * 1e3:.3f} | "
                         f"{f'{wait * 1e3:.3f}' if synced > 0 else 'not measured'} | {synced} |")
        lines.append("")
        plot_bytes(runs, os.path.join(out_dir, "train_bytes.png"))
        plot_memory(runs, os.path.join(out_dir, "train_memory.png"))
        plot_activations(runs, os.path.join(out_dir, "train_activations.png"))
        plot_losses(runs, os.path.join(out_dir, "loss_curves.png"))
        pictures += ["train_bytes.png", "train_memory.png", "train_activations.png", "loss_curves.png"]
        import timeline  # the pipeline timeline picture (timeline.py, beside this file)
        for r in runs:
            if int(r.attrs.get("pp", 1)) > 1 and len(r.tables.get("timeline", [])) > 0:
                name = f"timeline_{r.name}.png"
                step, rows = timeline.step_rows(r)
                timeline.draw(r, step, rows, os.path.join(out_dir, name), replay=True)
                pictures.append(name)
    if plan_json and os.path.exists(plan_json):
        lines += plan_lines(plan_json)
    return lines, pictures
