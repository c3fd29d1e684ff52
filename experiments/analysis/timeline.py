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
past the first step's warm-up), --title TEXT, --replay (a second panel: the recorded order of
actions replayed with unit pass times, the schedule's shape without the machine's noise).
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


def virtual_stage(stage, chunk, p, mapping):
    """The virtual stage a stage's chunk runs, as src/plan/virtual_stage.hpp numbers them:
    round-robin c·p + r; V-shaped r (chunk 0) and 2p − 1 − r (chunk 1); mirrored route·p +
    position, the route being the chunk flipped on the upper half of the stages."""
    if mapping == "v-shape":
        return stage if chunk == 0 else 2 * p - 1 - stage
    if mapping == "mirrored":
        route = chunk ^ (1 if stage >= p // 2 else 0)
        return route * p + (stage if route == 0 else p - 1 - stage)
    return chunk * p + stage


def unit_replay(rows, mapping="round-robin"):
    """The same per-stage action order replayed with unit pass times (T_F = T_B = T_W = 1, BW = 2)
    and instantaneous transfers: an action starts when its stage is free and its input exists (F
    after the previous virtual stage's F of the micro-batch, B after the next virtual stage's B —
    the last virtual stage's after its own F — and W after its own B), as `mdtp schedule`
    simulates it.  Returns rows with start_s/end_s in units and no waits."""
    stages = sorted(int(s) for s in np.unique(rows["stage"]))
    p = len(stages)
    chunks = int(np.max(rows["chunk"])) + 1
    if mapping in ("v-shape", "mirrored"):
        chunks = 2
    # Positions along a route: p under a mirror (two routes, virtual stage = route·p + position).
    positions = p if mapping == "mirrored" else p * chunks

    def first(vs):
        return vs % positions == 0

    def last(vs):
        return vs % positions == positions - 1
    lists = {s: [r for r in rows if int(r["stage"]) == s] for s in stages}
    for s in stages:
        lists[s].sort(key=lambda r: float(r["start_s"]))
    done = {}  # (kind, micro-batch, virtual stage) -> end time
    free = {s: 0.0 for s in stages}
    nxt = {s: 0 for s in stages}
    out = []
    progress = True
    while progress:
        progress = False
        for s in stages:
            while nxt[s] < len(lists[s]):
                r = lists[s][nxt[s]]
                op, mb, vs = str(r["op"]), int(r["microbatch"]), virtual_stage(s, int(r["chunk"]), p, mapping)
                if op == "F":
                    need = ("F", mb, vs - 1) if not first(vs) else None
                elif op in ("B", "BW"):
                    need = ("B", mb, vs + 1) if not last(vs) else ("F", mb, vs)
                else:
                    need = ("B", mb, vs)
                if need is not None and need not in done:
                    break
                start = max(free[s], done[need] if need is not None else 0.0)
                end = start + (2.0 if op == "BW" else 1.0)
                free[s] = end
                if op != "W":  # what others wait for: a forward's output, a B's input gradient
                    done[("F" if op == "F" else "B", mb, vs)] = start + 1.0
                out.append((s, op, mb, int(r["chunk"]), start, start, end))
                nxt[s] += 1
                progress = True
    if any(nxt[s] < len(lists[s]) for s in stages):
        raise SystemExit("the recorded action order does not complete when replayed (a recording error)")
    return np.rec.fromrecords(out, names="stage,op,microbatch,chunk,wait_start_s,start_s,end_s")


def draw_rows(ax, rows, chunks, scale, used):
    stages = sorted(int(s) for s in np.unique(rows["stage"]))
    end = float(np.max(rows["end_s"])) * scale
    ax.set_xlim(0, end * 1.01)
    ax.set_ylim(len(stages) - 0.5, -0.5)
    fig = ax.get_figure()
    width_px = ax.get_window_extent(fig.canvas.get_renderer()).width
    px_per_unit = width_px / (end * 1.01)
    for r in rows:
        y = int(r["stage"])
        start, stop, wait = float(r["start_s"]) * scale, float(r["end_s"]) * scale, float(r["wait_start_s"]) * scale
        if start - wait > 0:
            ax.barh(y, start - wait, left=wait, height=0.7, color="none", edgecolor="#999999", hatch="////",
                    linewidth=0)
        op = str(r["op"])
        used.add(op)
        ax.barh(y, stop - start, left=start, height=0.7, color=COLOURS.get(op, "#999999"), edgecolor="white",
                linewidth=0.6)
        label = f"{int(r['microbatch'])}.{int(r['chunk'])}" if chunks > 1 else f"{int(r['microbatch'])}"
        if (stop - start) * px_per_unit >= 6.5 * len(label) + 2:  # only where the number fits
            ax.text((start + stop) / 2, y, label, ha="center", va="center", fontsize=7, color="white")
    ax.set_yticks(stages)
    ax.set_yticklabels([f"stage {s}" for s in stages])
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def draw(run, step, rows, path, title=None, replay=False):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    stages = sorted(int(s) for s in np.unique(rows["stage"]))
    chunks = int(run.attrs.get("chunks", 1))
    end = float(np.max(rows["end_s"]))
    scale, unit = (1e3, "ms") if end < 10 else (1.0, "s")
    actions_per_stage = len(rows) / max(1, len(stages))
    width = max(9.0, min(24.0, 0.42 * actions_per_stage + 3))
    panel = 0.45 * len(stages) + 0.5
    panels = 2 if replay else 1
    fig, axes = plt.subplots(panels, 1, figsize=(width, panels * panel + 1.6), squeeze=False)
    used = set()
    draw_rows(axes[0][0], rows, chunks, scale, used)
    axes[0][0].set_xlabel(f"{unit} from each stage's start of step {step} (blank: idle)", fontsize=8)
    if replay:
        ideal = unit_replay(rows, str(run.attrs.get("stage_mapping", "round-robin")))
        draw_rows(axes[1][0], ideal, chunks, 1.0, used)
        axes[1][0].set_xlabel("the same action order replayed with unit pass times (T_F = T_B = T_W = 1)", fontsize=8)
    handles = [Patch(color=COLOURS[k], label=NAMES[k]) for k in ("F", "B", "W", "BW") if k in used]
    handles.append(Patch(facecolor="none", edgecolor="#999999", hatch="////", label="waiting for input (p2p)"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    a = run.attrs
    if title is None:
        title = (f"{a.get('schedule', '?')}: pp={a.get('pp', '?')}, m={a.get('micro_batches', '?')}"
                 + (f", v={chunks}" if chunks > 1 else "")
                 + f", mode {a.get('mode', '?')} tp={a.get('tp', '?')} dp={a.get('dp', '?')}")
    bubble = bubble_text(run, step)
    axes[0][0].set_title(title + ("\n" + bubble if bubble else ""), fontsize=9)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=130)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="a results file with a pipelined mdtp train run")
    parser.add_argument("-o", "--output", default="timeline.png", help="the picture (PNG, SVG or PDF)")
    parser.add_argument("--run", help="the run's name (e.g. 0002-train); default: the last train run")
    parser.add_argument("--step", type=int, help="the step (default: the run's last)")
    parser.add_argument("--title", help="replace the title line")
    parser.add_argument("--replay", action="store_true",
                        help="add a panel: the recorded action order replayed with unit pass times")
    a = parser.parse_args(argv)
    run = pick_run(a.results, a.run)
    step, rows = step_rows(run, a.step)
    draw(run, step, rows, a.output, a.title, a.replay)
    print(f"{a.output}: run {run.name}, step {step}, {len(np.unique(rows['stage']))} stages, {len(rows)} actions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
