#!/usr/bin/env python3
"""End-to-end checks of `mdtp schedule` and of `mdtp train` refusing bad pipelines
(tests/pipeline/tests.cmake registers one ctest each).

  test_schedule_cli.py --mdtp BIN --mpiexec M schedule
      the table and the JSON of every schedule for a table of (p, m, v, N), checked against the
      rules docs/pipeline.md states, computed here independently of the C++ code: every
      (micro-batch, chunk) forward and backward exactly once per stage, the warm-up counts, the
      orders (GPipe, 1F1B, Megatron-Core's interleaved groups, ZB-H1's phases), the simulated idle
      units with T_F = T_B = T_W = 1 (1F1B and GPipe 3(p−1) per stage, ZB-H1 p−1, interleaved
      3(p−1) when N = p divides m), the formula fractions, and the peak contexts (1F1B min(p−r, m)
      full; ZB-H1 at most p−r full and r weight-only, the peak over stages no more than 1F1B's);
      DualPipeV's eight phases written out here from the DualPipe repository's dualpipev.py, its
      F&B pairs, V placement and idle units (within the README's (p−1)(F&B+B−3W)), ZB-H2's
      parallelogram (idle p−1 per stage, 2p−1 contexts) and ZB-V's makespan 6m+p−1 with 2p
      contexts; bad values refused with one line, exit 2.
  test_schedule_cli.py --mdtp BIN --mpiexec M --data CORPUS refusals
      `mdtp train` under mpiexec with a pipeline it cannot run: one line for the job (rank 0),
      exit 2, no hang (refused before any collective).
"""
import argparse
import json
import subprocess
import sys

TIMEOUT = 120


def run(command):
    result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT)
    print("$", " ".join(command))
    print("exit status:", result.returncode)
    print("stdout:", result.stdout[-3000:])
    print("stderr:", result.stderr[-3000:])
    return result


# ---- the rules, written from docs/pipeline.md ------------------------------------------------

def dualpipev_actions(p, m, r):
    """DualPipeV's stage r (dualpipev.py, DualPipeV.step): (op, micro-batch, chunk, paired)."""
    a, f, b, deferred = [], [0, 0], [0, 0], []

    def fwd(c, paired=False):
        a.append(("F", f[c], c, paired))
        f[c] += 1

    def bwd(c, split):
        if split:
            a.append(("B", b[c], c, False))
            deferred.append(("W", b[c], c, False))
        else:
            a.append(("BW", b[c], c, False))
        b[c] += 1

    def weight():
        a.append(deferred.pop(0))

    for _ in range(2 * (p - r - 1)):
        fwd(0)
    for _ in range(r + 1):
        fwd(0), fwd(1)
    for _ in range(p - r - 1):
        bwd(1, True), weight(), fwd(1)
    for i in range(m - 2 * p + r + 1):
        if i == 0 and r == p - 1:
            fwd(0), bwd(1, False)
        else:
            fwd(0, True), bwd(1, False)
        fwd(1, True), bwd(0, False)
    for _ in range(p - r - 1):
        bwd(1, False), fwd(1, True), bwd(0, False)
    split = False
    for i in range(r + 1):
        if i == (r + 1) // 2 and r % 2 == 1:
            split = True
        bwd(1, split)
        if i == (r + 1) // 2 and r % 2 == 0:
            split = True
        bwd(0, split)
    for _ in range(p - r - 1):
        weight(), bwd(0, True)
    for _ in range(r + 1):
        weight()
    assert not deferred
    return a


def dualpipe_actions(p, m, r):
    """DualPipe's stage r (dualpipe.py, DualPipe.step): DualPipeV's phases on the half-rank
    min(r, p−1−r) of p/2 with m/2 micro-batches per route; chunk 0 is the lower position, whose
    route is 0 (down, micro-batches 0 … m/2−1) on the lower half of the stages and 1 (up, the rest)
    on the upper half."""
    upper = 1 if r >= p // 2 else 0
    return [(op, i + ((c ^ upper) * (m // 2)), c, pair) for op, i, c, pair in dualpipev_actions(p // 2, m // 2, min(r, p - 1 - r))]


def warmup(kind, p, m, v, n, r):
    """Forwards before the first backward-input pass."""
    if kind in ("zb-h2", "zb-v", "dualpipev", "dualpipe"):
        return None  # read off the order; checked by the order itself
    if kind == "gpipe":
        return m
    if kind in ("1f1b", "zb-h1"):
        return min(p - r - 1, m) + (1 if m > p - r - 1 else 0)
    w = min(2 * (p - r - 1) + (v - 1) * n, m * v)
    return w + (1 if w < m * v else 0)


def interleaved_forwards(m, v, n):
    order = []
    for first in range(0, m, n):
        for c in range(v):
            order += [(i, c) for i in range(first, min(first + n, m))]
    return order


def expected_actions(kind, p, m, v, n, r):
    """The stage's action list as (op, micro-batch, chunk), from the rules."""
    if kind == "gpipe":
        return [("F", i, 0) for i in range(m)] + [("BW", i, 0) for i in range(m)]
    if kind == "1f1b":
        w = min(p - r - 1, m)
        a = [("F", i, 0) for i in range(w)]
        for i in range(m - w):
            a += [("F", w + i, 0), ("BW", i, 0)]
        return a + [("BW", i, 0) for i in range(m - w, m)]
    if kind == "dualpipev":
        return [x[:3] for x in dualpipev_actions(p, m, r)]
    if kind == "dualpipe":
        return [x[:3] for x in dualpipe_actions(p, m, r)]
    if kind in ("zb-h2", "zb-v"):
        return None  # built by a list scheduler / the authors' greedy: checked by their properties
    if kind == "interleaved":
        fw = interleaved_forwards(m, v, n)
        bw = [(i, v - 1 - c) for i, c in fw]
        w = min(2 * (p - r - 1) + (v - 1) * n, m * v)
        a = [("F",) + x for x in fw[:w]]
        for k in range(m * v - w):
            a += [("F",) + fw[w + k], ("BW",) + bw[k]]
        return a + [("BW",) + x for x in bw[m * v - w:]]
    # zb-h1: p−r−1 forwards; r (F, B); (F, B, W); m−p (F, B, W); p−r−1 (B, W); r W's.
    seq = ["F"] * (p - r - 1) + ["F", "B"] * r + ["F", "B", "W"] * (m - p + 1) + ["B", "W"] * (p - r - 1) + ["W"] * r
    count = {"F": 0, "B": 0, "W": 0}
    a = []
    for op in seq:
        a.append((op, count[op], 0))
        count[op] += 1
    return a


def formula(kind, p, m, v):
    if kind == "zb-v":
        return (p - 1) / (6 * m + p - 1)
    if kind == "dualpipev":
        return 2 * (p - 1) / (6 * m + 2 * (p - 1))
    if kind == "dualpipe":
        return 2 * (p // 2 - 1) / (3 * m + 2 * (p // 2 - 1))
    if kind in ("gpipe", "1f1b"):
        return (p - 1) / (m + p - 1)
    if kind == "interleaved":
        return (p - 1) / (v * m + p - 1)
    return (p - 1) / (3 * m + p - 1)


def peaks(actions):
    full = weight = pf = pw = pt = 0
    for op, _, _ in actions:
        full += op == "F"
        full -= op in ("B", "BW")
        weight += op == "B"
        weight -= op == "W"
        pf, pw, pt = max(pf, full), max(pw, weight), max(pt, full + weight)
    return pf, pw, pt


CASES = [  # kind, p, m, v, N (0: p)
    ("gpipe", 1, 1, 1, 0), ("gpipe", 4, 8, 1, 0), ("gpipe", 3, 2, 1, 0),
    ("1f1b", 1, 3, 1, 0), ("1f1b", 2, 1, 1, 0), ("1f1b", 4, 8, 1, 0), ("1f1b", 4, 2, 1, 0), ("1f1b", 5, 7, 1, 0),
    ("interleaved", 2, 2, 2, 0), ("interleaved", 4, 8, 2, 0), ("interleaved", 3, 6, 3, 0),
    ("interleaved", 2, 5, 2, 3), ("interleaved", 4, 12, 2, 8),
    ("zb-h1", 2, 2, 1, 0), ("zb-h1", 4, 8, 1, 0), ("zb-h1", 4, 4, 1, 0), ("zb-h1", 3, 7, 1, 0),
    ("zb-h2", 2, 3, 1, 0), ("zb-h2", 4, 7, 1, 0), ("zb-h2", 4, 12, 1, 0), ("zb-h2", 5, 9, 1, 0),
    ("zb-v", 2, 2, 2, 0), ("zb-v", 4, 8, 2, 0), ("zb-v", 3, 5, 2, 0), ("zb-v", 5, 9, 2, 0),
    ("dualpipev", 2, 4, 2, 0), ("dualpipev", 4, 8, 2, 0), ("dualpipev", 4, 11, 2, 0), ("dualpipev", 3, 7, 2, 0),
    ("dualpipe", 2, 4, 2, 0), ("dualpipe", 4, 8, 2, 0), ("dualpipe", 4, 12, 2, 0), ("dualpipe", 6, 14, 2, 0),
]
V_SHAPED = ("zb-v", "dualpipev")
TWO_CHUNKS = ("zb-v", "dualpipev", "dualpipe")


def check_schedule_json(mdtp, kind, p, m, v, n):
    args = [mdtp, "schedule", "--schedule", kind, "--pp", str(p), "--micro-batches", str(m)]
    if v > 1 and kind not in TWO_CHUNKS:  # a V or a mirror brings its two chunks
        args += ["--chunks", str(v)]
    if n:
        args += ["--group-size", str(n)]
    r = run(args + ["--json"])
    where = f"{kind} p={p} m={m} v={v} N={n}"
    if r.returncode != 0:
        return [f"{where}: exit status {r.returncode}"]
    doc = json.loads(r.stdout)
    failures = []
    group = n if n else (p if kind == "interleaved" else 1)
    for key, want in (("schedule", kind), ("pp", p), ("micro_batches", m), ("chunks", v)):
        if doc.get(key) != want:
            failures.append(f"{where}: {key} = {doc.get(key)!r}, expected {want!r}")
    if [s["stage"] for s in doc["stages"]] != list(range(p)):
        failures.append(f"{where}: stages are not 0 … {p - 1}")
        return failures
    nf = group if kind == "interleaved" else n
    one_f_one_b_peak = max(min(p - r, m) for r in range(p))
    stage_peaks = []
    v_shaped = kind in V_SHAPED
    mirrored = kind == "dualpipe"
    mapping = "v-shape" if v_shaped else "mirrored" if mirrored else "round-robin"
    loss = [0] if v_shaped else [0, p - 1] if mirrored else [p - 1]
    for key, want in (("stage_mapping", mapping), ("loss_stages", loss), ("parameter_copies", 2 if mirrored else 1)):
        if doc.get(key) != want:
            failures.append(f"{where}: {key} = {doc.get(key)!r}, expected {want!r}")
    for r, stage in enumerate(doc["stages"]):
        got = [(a["op"], a["microbatch"], a["chunk"]) for a in stage["actions"]]
        for a in stage["actions"]:
            keys = [k for k in a.keys() if k != "pair"]
            if keys != ["op", "microbatch", "chunk", "virtual_stage", "direction"]:
                failures.append(f"{where}: action keys {list(a.keys())}")
                break
            if v_shaped:
                vs, direction = (r, "down") if a["chunk"] == 0 else (2 * p - 1 - r, "up")
            elif mirrored:  # route 0 runs position k on stage k, route 1 on stage p−1−k
                route = a["chunk"] ^ (1 if r >= p // 2 else 0)
                vs, direction = (r, "down") if route == 0 else (p + p - 1 - r, "up")
            else:
                vs, direction = a["chunk"] * p + r, "down"
            if a["virtual_stage"] != vs or a["direction"] != direction:
                failures.append(f"{where}: stage {r} action {a}: expected virtual stage {vs}, {direction}")
                break
        want = expected_actions(kind, p, m, v, nf, r)
        if want is not None and got != want:
            failures.append(f"{where}: stage {r} actions {got} differ from the rule's {want}")
        if want is None:
            want = got  # ZB-H2, ZB-V: their properties below
        if kind in ("dualpipev", "dualpipe"):  # the F&B pairs: the forward and the full backward after it
            paired = [a.get("pair") == "F&B" for a in stage["actions"]]
            ref = dualpipev_actions(p, m, r) if kind == "dualpipev" else dualpipe_actions(p, m, r)
            expect = [ref[k][3] or (k > 0 and ref[k - 1][3]) for k in range(len(ref))]
            if paired != expect:
                failures.append(f"{where}: stage {r} F&B pairs {paired} differ from the reference's")
        if warmup(kind, p, m, v, nf, r) is not None and stage["warmup_forwards"] != warmup(kind, p, m, v, nf, r):
            failures.append(f"{where}: stage {r} warm-up {stage['warmup_forwards']}, "
                            f"rule {warmup(kind, p, m, v, nf, r)}")
        # Every (micro-batch, chunk) forwarded once and its backward halves run once.
        passes = {}
        for op, i, c in got:
            for half in {"F": ["F"], "B": ["B"], "W": ["W"], "BW": ["B", "W"]}[op]:
                passes[(half, i, c)] = passes.get((half, i, c), 0) + 1
        if mirrored:  # each chunk runs the micro-batches of its route: half of them
            upper = 1 if r >= p // 2 else 0
            expected = {(h, i, c): 1 for h in "FBW" for c in range(2) for i in range(m)
                        if (i >= m // 2) == bool(c ^ upper)}
        else:
            expected = {(h, i, c): 1 for h in "FBW" for i in range(m) for c in range(v)}
        if passes != expected:
            failures.append(f"{where}: stage {r} does not run every pass exactly once")
        busy = 3 * m * (2 if v_shaped else 1 if mirrored else v)
        if stage["busy_units"] != busy:
            failures.append(f"{where}: stage {r} busy {stage['busy_units']} units, expected {busy}")
        idle = stage["idle_units"]
        if doc["makespan_units"] != busy + idle:
            failures.append(f"{where}: stage {r} busy + idle != makespan")
        if kind in ("gpipe", "1f1b") and idle != 3 * (p - 1):
            failures.append(f"{where}: stage {r} idles {idle} units, expected 3(p-1) = {3 * (p - 1)}")
        if kind == "zb-h1" and idle != p - 1:
            failures.append(f"{where}: stage {r} idles {idle} units, expected p-1 = {p - 1} (Qi et al.)")
        if kind == "interleaved" and m % group == 0 and group == p and idle != 3 * (p - 1):
            failures.append(f"{where}: stage {r} idles {idle} units, expected 3(p-1) = {3 * (p - 1)}")
        # ZB-H2 under a synchronous step: a parallelogram, p − 1 idle units on every stage.
        if kind == "zb-h2" and m >= 2 * p - 1 and idle != p - 1:
            failures.append(f"{where}: stage {r} idles {idle} units, expected p-1 = {p - 1}")
        # ZB-V (the authors' greedy): makespan 6m + p − 1 chunk units, so p − 1 idle per stage.
        if kind == "zb-v" and doc["makespan_units"] != 6 * m + p - 1:
            failures.append(f"{where}: makespan {doc['makespan_units']}, expected 6m+p-1 = {6 * m + p - 1}")
        # DualPipeV: within the README's (p−1)(F&B + B − 3W) with F&B = 3, B = 2 (full), W = 1.
        if kind == "dualpipev" and idle > (p - 1) * (3 + 2 - 3):
            failures.append(f"{where}: stage {r} idles {idle} units, above (p-1)(F&B+B-3W) = {2 * (p - 1)}")
        if kind == "dualpipe" and idle > (p // 2 - 1) * (3 + 2 - 3):
            failures.append(f"{where}: stage {r} idles {idle} units, above (p/2-1)(F&B+B-3W) = {2 * (p // 2 - 1)}")
        pk = stage["peak_contexts"]
        pf, pw, pt = peaks(want)
        if (pk["full"], pk["weight_only"], pk["total"]) != (pf, pw, pt):
            failures.append(f"{where}: stage {r} peak contexts {pk}, counted {(pf, pw, pt)}")
        if kind == "1f1b" and pk["full"] != min(p - r, m):
            failures.append(f"{where}: stage {r} holds {pk['full']} contexts, expected min(p-r, m) = {min(p - r, m)}")
        # ZB-H1: p−r full contexts and r weight-only ones when a forward has just run; between a B
        # and its W one more weight-only in place of a full one — never more than p in all.
        if kind == "zb-h1" and (pk["full"] > p - r or pk["weight_only"] > r + 1 or pk["total"] > p):
            failures.append(f"{where}: stage {r} holds {pk}: more than p-r = {p - r} full, r+1 = {r + 1} "
                            f"W-only or p = {p} in all")
        bound = {"zb-h2": 2 * p - 1, "zb-v": 2 * p, "dualpipev": 2 * p + 1, "dualpipe": p + 1}.get(kind)
        if bound is not None and pk["total"] > bound:
            failures.append(f"{where}: stage {r} holds {pk['total']} contexts, more than {bound}")
        stage_peaks.append(pk["full"])
    if kind == "zb-h1" and max(stage_peaks) > one_f_one_b_peak:
        failures.append(f"{where}: ZB-H1's peak {max(stage_peaks)} full contexts exceeds 1F1B's {one_f_one_b_peak}")
    b = doc["bubble"]
    if abs(b["formula_fraction"] - formula(kind, p, m, v)) > 1e-12:
        failures.append(f"{where}: formula fraction {b['formula_fraction']}, expected {formula(kind, p, m, v)}")
    worst = max(s["idle_units"] for s in doc["stages"]) / doc["makespan_units"]
    if abs(b["simulated_fraction"] - worst) > 1e-12:
        failures.append(f"{where}: simulated fraction {b['simulated_fraction']}, stages say {worst}")
    exact = kind in ("gpipe", "1f1b", "zb-h1", "zb-v") or (kind == "zb-h2" and m >= 2 * p - 1) or \
        (kind == "interleaved" and m % group == 0 and group == p)
    if kind in ("dualpipev", "dualpipe") and worst > formula(kind, p, m, v) + 1e-12:  # a bound, not an equality
        failures.append(f"{where}: simulated bubble {worst} above the bound {formula(kind, p, m, v)}")
    if exact and abs(worst - formula(kind, p, m, v)) > 1e-12:
        failures.append(f"{where}: simulated bubble {worst} differs from the formula {formula(kind, p, m, v)}")
    return failures


def check_schedule(mdtp):
    failures = []
    for case in CASES:
        failures += check_schedule_json(mdtp, *case)
    # The table: one row per stage holding its actions, and the bubble line.
    r = run([mdtp, "schedule", "--schedule", "zb-h1", "--pp", "4", "--micro-batches", "8"])
    if r.returncode != 0:
        failures.append(f"table: exit status {r.returncode}")
    lines = r.stdout.splitlines()
    for stage in range(4):
        want = " ".join(f"{op}{i}" for op, i, _ in expected_actions("zb-h1", 4, 8, 1, 0, stage))
        if not any(line.strip().startswith(f"stage  {stage} |") and line.endswith(want) for line in lines):
            failures.append(f"table: no row 'stage  {stage} | {want}'")
    if "formula (p-1)/(3*m+p-1)" not in r.stdout:
        failures.append("table: no bubble formula line")
    r = run([mdtp, "schedule", "--schedule", "interleaved", "--pp", "2", "--micro-batches", "4", "--chunks", "2"])
    if r.returncode != 0 or "F0.1" not in r.stdout:
        failures.append("interleaved table: no 'F0.1' (micro-batch.chunk) entry")
    # Bad values: one line `mdtp schedule: error: ...`, exit 2, nothing on stdout.
    bad = [
        (["--schedule", "zb-h3", "--pp", "4", "--micro-batches", "8"], "unknown pipeline schedule 'zb-h3'"),
        (["--schedule", "dualpipev", "--pp", "4", "--micro-batches", "7"],
         "needs at least 2 x pp = 8 micro-batches; got m=7"),
        (["--schedule", "zb-v", "--pp", "1", "--micro-batches", "4"], "the zb-v schedule needs pp >= 2; got pp=1"),
        (["--schedule", "zb-v", "--pp", "2", "--micro-batches", "4", "--chunks", "3"], "2 chunks per stage"),
        (["--schedule", "dualpipe", "--pp", "3", "--micro-batches", "6"], "needs an even pp >= 2"),
        (["--schedule", "dualpipe", "--pp", "2", "--micro-batches", "5"], "even number of micro-batches"),
        (["--schedule", "1f1b", "--pp", "0", "--micro-batches", "8"], "--pp: must be >= 1; got 0"),
        (["--schedule", "1f1b", "--pp", "two", "--micro-batches", "8"], "--pp: needs a whole number; got 'two'"),
        (["--schedule", "1f1b", "--micro-batches", "8"], "mdtp schedule needs --pp"),
        (["--schedule", "interleaved", "--pp", "4", "--micro-batches", "6", "--chunks", "2"],
         "m mod N either 0 or >= pp; got m=6, N=4"),
        (["--schedule", "interleaved", "--pp", "4", "--micro-batches", "3", "--chunks", "2"], "micro-batches m=3"),
        (["--schedule", "interleaved", "--pp", "2", "--micro-batches", "4", "--chunks", "1"], "needs --chunks >= 2"),
        (["--schedule", "1f1b", "--pp", "2", "--micro-batches", "4", "--chunks", "2"],
         "--chunks 2 applies only to the interleaved schedule"),
        (["--schedule", "zb-h1", "--pp", "4", "--micro-batches", "3"], "needs at least pp=4 micro-batches; got m=3"),
    ]
    for args, text in bad:
        r = run([mdtp, "schedule"] + args)
        lines = r.stderr.splitlines()
        if r.returncode != 2 or len(lines) != 1 or not lines[0].startswith("mdtp schedule: error: ") \
                or text not in lines[0] or r.stdout:
            failures.append(f"{args}: expected exit 2 and one line 'mdtp schedule: error: …{text}…'")
    return failures


def check_refusals(mdtp, mpiexec, data):
    """Bad pipelines for `mdtp train`: one line on each rank, exit 2."""
    failures = []
    cases = [
        (2, ["--pp", "2", "--layers", "3"], "the 3 layers do not split evenly over pp=2"),
        (2, ["--pp", "2", "--layers", "4", "--pp-layers", "1,2"], "the layer split sums to 3 layers; the model has 4"),
        (2, ["--pp", "2", "--layers", "4", "--pp-layers", "2,2,0"], "the layer split has 3 entries"),
        (4, ["--pp", "2", "--layers", "4", "--schedule", "interleaved", "--chunks", "2", "--micro-batches", "3",
             "--global-batch", "6"], "m mod N either 0 or >= pp"),
        (2, ["--pp", "2", "--layers", "4", "--schedule", "zb-h1", "--micro-batches", "1", "--global-batch", "2"],
         "the zb-h1 schedule needs at least pp=2 micro-batches"),
        (2, ["--pp", "2", "--layers", "6", "--schedule", "zb-v", "--micro-batches", "2", "--global-batch", "2"],
         "the 6 layers do not split evenly over pp=2 × chunks=2"),
        (2, ["--pp", "2", "--layers", "4", "--schedule", "dualpipev", "--micro-batches", "2", "--global-batch", "2"],
         "the dualpipev schedule needs at least 2 x pp = 4 micro-batches; got m=2"),
        (3, ["--pp", "2", "--layers", "4"], "world=3 is not divisible by tp*pp*cp=2"),
        (4, ["--pp", "2", "--tp-mode", "1d", "--tp", "4", "--layers", "4"], "world=4 is not divisible by tp*pp*cp=8"),
    ]
    for ranks, args, text in cases:
        r = run([mpiexec, "-n", str(ranks), mdtp, "train", "--steps", "1", "--seq", "8", "--data", data] + args)
        lines = r.stderr.splitlines()
        where = f"{ranks} ranks, {args}"
        if r.returncode != 2:
            failures.append(f"{where}: exit status {r.returncode}, expected 2")
        if len(lines) != 1:  # once for the job, by rank 0
            failures.append(f"{where}: {len(lines)} error line(s), expected one for the job")
        for line in lines:
            if not line.startswith("mdtp train: error: ") or text not in line:
                failures.append(f"{where}: line {line!r} is not 'mdtp train: error: …{text}…'")
    return failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mdtp", required=True)
    parser.add_argument("--mpiexec", required=True)
    parser.add_argument("--data", help="a text corpus for mdtp train")
    parser.add_argument("check", choices=["schedule", "refusals"])
    a = parser.parse_args()
    failures = check_schedule(a.mdtp) if a.check == "schedule" else check_refusals(a.mdtp, a.mpiexec, a.data)
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
