#!/usr/bin/env python3
"""Draw a pipelined training run as a timeline: one row per stage, each action a box coloured by
its kind (F forward, B backward-input, W weight pass, BW the fused backward), the micro-batch
number in the box (micro-batch.chunk when stages hold several chunks), the time an action waited
for its input hatched, and idle time left blank.

It reads the `timeline` table of a `mdtp train` run (one representative rank per stage; times in
seconds from that stage's own start of the step) and the `pipeline` table for the measured bubble
beside the simulator's prediction:

    mpiexec -n 4 build/mdtp train --pp 4 --schedule zb-h1 --micro-batches 8 --steps 2 --out run.h5
    /usr/bin/python3 experiments/analysis/timeline.py run.h5 -o timeline.png

Options: --run NAME (default: the file's last train run), --step N (default: the run's last step,
past the first step's warm-up), --title TEXT.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mdtp_results  # noqa: E402

COLOURS = {"F": "#4C72B0", "B": "#DD8452", "W": "#55A868", "BW": "#8172B3"}
NAMES = {"F": "F (forward)", "B": "B (input gradient)", "W": "W (weight gradient)", "BW": "BW (B and W fused)"}


def pick_run(path, name=None):
    runs = mdtp_results.load_runs(path, "train")
    if not runs:
        raise SystemExit(f"{path}: no train run")
    if name is not None:
        if name not in runs:
            raise SystemExit(f"{path}: no run {name!r}; train runs: {', '.join(runs)}")
        return runs[name]
    return runs[max(runs)]


def step_rows(run, step=None):
    if "timeline" not in run.tables or len(run.tables["timeline"]) == 0:
        raise SystemExit(f"run {run.name} has no timeline table (a run of mdtp train with a pipeline writes one)")
    t = run.tables["timeline"]
    steps = np.unique(t["step"])
    step = int(steps.max()) if step is None else step
    if step not in steps:
        raise SystemExit(f"run {run.name} has no step {step}; steps: {', '.join(str(s) for s in steps)}")
    return step, t[t["step"] == step]


def bubble_text(run, step):
    p = run.tables.get("pipeline")
    if p is None or len(p) == 0:
        return ""
    rows = p[p["step"] == step]
    if len(rows) == 0:
        return ""
    measured = float(np.max(rows["bubble_measured"]))
    model = float(np.max(rows["bubble_model"]))
    return f"bubble (idle/step, worst stage): measured {measured:.2f}, simulator with measured pass times {model:.2f}"


def draw(run, step, rows, path, title=None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    stages = sorted(int(s) for s in np.unique(rows["stage"]))
    chunks = int(run.attrs.get("chunks", 1))
    end = float(np.max(rows["end_s"]))
    scale, unit = (1e3, "ms") if end < 10 else (1.0, "s")
    fig, ax = plt.subplots(figsize=(max(8.0, min(24.0, 0.32 * len(rows) / max(1, len(stages)) + 4)),
                                    1.0 + 0.65 * len(stages)))
    used = []
    for r in rows:
        stage = int(r["stage"])
        y = stage
        start, stop, wait = float(r["start_s"]) * scale, float(r["end_s"]) * scale, float(r["wait_start_s"]) * scale
        if start - wait > 0:
            ax.barh(y, start - wait, left=wait, height=0.7, color="none", edgecolor="#999999", hatch="////",
                    linewidth=0)
        op = str(r["op"])
        used.append(op)
        ax.barh(y, stop - start, left=start, height=0.7, color=COLOURS.get(op, "#999999"), edgecolor="white",
                linewidth=0.6)
        label = f"{int(r['microbatch'])}.{int(r['chunk'])}" if chunks > 1 else f"{int(r['microbatch'])}"
        ax.text((start + stop) / 2, y, label, ha="center", va="center", fontsize=7, color="white",
                clip_on=True)
    ax.set_yticks(stages)
    ax.set_yticklabels([f"stage {s}" for s in stages])
    ax.invert_yaxis()
    ax.set_xlim(0, end * scale * 1.01)
    ax.set_xlabel(f"{unit} from each stage's start of step {step} (blank: idle)")
    handles = [Patch(color=COLOURS[k], label=NAMES[k]) for k in ("F", "B", "W", "BW") if k in used]
    handles.append(Patch(facecolor="none", edgecolor="#999999", hatch="////", label="waiting for input (p2p)"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.35 if len(stages) > 2 else -0.5),
              ncol=len(handles), fontsize=8, frameon=False)
    a = run.attrs
    if title is None:
        title = (f"{a.get('schedule', '?')}: pp={a.get('pp', '?')}, m={a.get('micro_batches', '?')}"
                 + (f", v={chunks}" if chunks > 1 else "")
                 + f", mode {a.get('mode', '?')} tp={a.get('tp', '?')} dp={a.get('dp', '?')}")
    bubble = bubble_text(run, step)
    ax.set_title(title + ("\n" + bubble if bubble else ""), fontsize=9)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="a results file with a pipelined mdtp train run")
    parser.add_argument("-o", "--output", default="timeline.png", help="the picture (PNG, SVG or PDF)")
    parser.add_argument("--run", help="the run's name (e.g. 0002-train); default: the last train run")
    parser.add_argument("--step", type=int, help="the step (default: the run's last)")
    parser.add_argument("--title", help="replace the title line")
    a = parser.parse_args(argv)
    run = pick_run(a.results, a.run)
    step, rows = step_rows(run, a.step)
    draw(run, step, rows, a.output, a.title)
    print(f"{a.output}: run {run.name}, step {step}, {len(np.unique(rows['stage']))} stages, {len(rows)} actions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
