#!/usr/bin/env python3
"""`mdtp plan --json` parses and has its keys (tests/cost/tests.cmake registers each form).

  check_plan_json.py MDTP one       one configuration, the 1T row of Narayanan et al. 2021: `mdtp cost`'s
                                    GPT-step form (plan has no one-configuration form: every run flag
                                    given to it fixes that axis of the search), with its data-sheet bound
  check_plan_json.py MDTP fixed     `mdtp plan` with the same flags: a search whose every configuration
                                    has the fixed layout (mode, tp, pp, dp, schedule, chunks,
                                    micro-batch, recomputation), ranked, the quickest near the 1T row
  check_plan_json.py MDTP search    a ranked search, --top 3
  check_plan_json.py MDTP switches  every step switch (--engine-kernels, --no-check-for-nan-in-grad, the
                                    overlaps, --grad-reduce-dtype, --optimizer sgd, ...) priced by `mdtp plan` as
                                    by `mdtp cost`: one layout fixed, plan's quickest configuration has cost's step
                                    time to 1e-12, and the switch moves it; and a ZeRO option alone
                                    (--zero-keep-params, --zero-reduce-per-micro-batch) searches only the stages it
                                    applies to
  check_plan_json.py MDTP validate  the validation table; then a user's table file (--table FILE: two rows of the
                                    shipped A100 table, the same predictions) and a broken one (exit 2, one line on
                                    stderr, nothing on stdout)
"""
import json
import os
import subprocess
import sys
import tempfile

ESTIMATE_KEYS = ["step_s", "tokens_per_s", "tflops_per_gpu", "mfu", "hfu", "memory_per_gpu_bytes", "fits", "time",
                 "memory", "config", "placement"]
TIME_KEYS = ["compute_s", "tp_comm_s", "pp_comm_s", "dp_comm_s", "bubble_s", "optimizer_s"]
MEMORY_KEYS = ["parameters_bytes", "parameters_gathered_bytes", "gradients_bytes", "gradients_in_step_bytes"]
CONFIG_KEYS = ["zero", "zero_reduce_per_micro_batch", "zero_keep_parameters"]
MODEL = ["--layers", "128", "--hidden", "25600", "--heads", "160", "--seq", "2048", "--vocab", "51200"]
# The 1T row: Megatron-LM's bf16 with dropout (mdtp's defaults are f32 and no dropout, as mdtp train).
ROW_1T = MODEL + ["--global-batch", "3072", "--micro-batch-size", "1", "--tp-mode", "1d", "--tp", "8", "--pp", "64",
                  "--gpus", "3072", "--schedule", "interleaved", "--chunks", "2", "--recompute", "full",
                  "--dtype", "bf16", "--dropout", "0.1", "--cluster", "dgx-a100", "--json"]
# What the 1T row's flags fix in every configuration of the search (config keys of the JSON).
FIXED_1T = {"tp_mode": "1d", "tp": 8, "pp": 64, "dp": 6, "schedule": "interleaved", "chunks": 2, "micro_batch": 1,
            "recompute": "full", "dtype": "bf16"}
FORMS = {  # form: (command, its flags)
    "one": ("cost", ROW_1T),
    "fixed": ("plan", ROW_1T + ["--top", "0"]),
    "search": ("plan", ["--layers", "8", "--hidden", "1024", "--heads", "16", "--seq", "512", "--vocab", "8192",
                        "--global-batch", "32", "--gpus", "16", "--top", "3", "--json"]),
    "validate": ("plan", ["--validate", "--json"]),
    "switches": (None, []),
}
# One layout on four DGX A100 nodes (tp inside a node; dp 8 over two nodes, 4 GPUs in each), every axis of
# the search fixed.
SWITCH_LAYOUT = ["--layers", "8", "--hidden", "1024", "--heads", "16", "--seq", "512", "--vocab", "8192",
                 "--global-batch", "64", "--gpus", "32", "--tp", "2", "--pp", "2", "--schedule", "interleaved",
                 "--chunks", "2", "--micro-batch-size", "1", "--zero", "1", "--recompute", "none", "--dtype", "bf16",
                 "--dropout", "0.1", "--cluster", "dgx-a100", "--json"]
# (TP mode, the switch's flags, flags beside it that let it show): each where it applies
# (--tp-comm-overlap under sequence parallelism, --no-p2p-scatter-gather without it, mdtp's own
# collectives where the data-parallel reduction is not hidden under the backward).
SWITCHES = [("1d", ["--engine-kernels"], []), ("1d", ["--no-check-for-nan-in-grad"], []),
            ("1d", ["--cross-entropy-fusion"], []), ("1d", ["--no-p2p-scatter-gather"], []),
            ("1d-sp", ["--tp-comm-overlap"], []), ("1d", ["--no-dp-overlap"], []), ("1d", ["--p2p-overlap"], []),
            ("1d", ["--no-gradient-accumulation-fusion"], []), ("1d", ["--streaming-attention"], []),
            ("1d", ["--input-grad-first"], []), ("1d", ["--no-tp-backward-overlap"], []),
            ("1d", ["--overlap-param-gather"], []), ("1d", ["--grad-reduce-dtype", "bf16"], []),
            ("1d", ["--nccl-algo", "tree"], []), ("1d", ["--own-collectives"], ["--no-dp-overlap"]),
            ("1d", ["--optimizer", "sgd"], []), ("1d", ["--zero-offload"], [])]


def check_estimate(e, where):
    missing = [k for k in ESTIMATE_KEYS if k not in e] + [f"time.{k}" for k in TIME_KEYS if k not in e.get("time", {})]
    missing += [f"memory.{k}" for k in MEMORY_KEYS if k not in e.get("memory", {})]
    missing += [f"config.{k}" for k in CONFIG_KEYS if k not in e.get("config", {})]
    if missing:
        sys.exit(f"{where}: missing keys {missing}")
    split = sum(e["time"][k] for k in TIME_KEYS)
    if abs(split - e["step_s"]) > 1e-9 * e["step_s"]:
        sys.exit(f"{where}: the time split {split} does not add up to step_s {e['step_s']}")
    k = e.get("compute", {})
    if not all(k.get(key, 0) > 0 for key in ("gemm_s", "gemm_flops", "stream_s", "stream_bytes")) or \
            abs(k["gemm_s"] + k["stream_s"] - e["time"]["compute_s"]) > 1e-9 * e["time"]["compute_s"]:
        sys.exit(f"{where}: the compute split {k} does not add up to time.compute_s {e['time']['compute_s']}")
    if not 0 < e["mfu"] <= e["hfu"] <= 1:
        sys.exit(f"{where}: expected 0 < mfu <= hfu <= 1, got {e['mfu']}, {e['hfu']}")
    m = e["memory"]
    if not 0 <= m["gradients_in_step_bytes"] <= m["gradients_bytes"]:
        sys.exit(f"{where}: the full buckets inside a step ({m['gradients_in_step_bytes']} B) are part of the "
                 f"gradients ({m['gradients_bytes']} B)")
    if not 0 <= m["parameters_gathered_bytes"] <= m["parameters_bytes"]:
        sys.exit(f"{where}: the gathered parameters ({m['parameters_gathered_bytes']} B) are part of the "
                 f"parameters ({m['parameters_bytes']} B)")
    if (m["parameters_gathered_bytes"] > 0) != (e["config"]["zero"] == 3):
        sys.exit(f"{where}: gathered parameters {m['parameters_gathered_bytes']} B at ZeRO stage {e['config']['zero']}")
    if e["config"]["zero_keep_parameters"] and e["config"]["zero"] != 3:
        sys.exit(f"{where}: keep-params at ZeRO stage {e['config']['zero']}")
    if e["config"]["zero_reduce_per_micro_batch"] and e["config"]["zero"] < 2:
        sys.exit(f"{where}: reduction per micro-batch at ZeRO stage {e['config']['zero']}")


def check_table_files(mdtp, narayanan):
    """--table FILE: a user's table validates like the shipped one; a broken file is refused in one line."""
    with tempfile.TemporaryDirectory() as tmp:
        source = subprocess.run([mdtp, "plan", "--validate", "--table", "narayanan-2021"], capture_output=True,
                                text=True, timeout=600)
        if source.returncode != 0:
            sys.exit(f"--table narayanan-2021 exited with {source.returncode}")
        # The user's file: the shipped table's rule, its 18.4B and 1T rows with their setups.
        table = {"key": "mine", "title": "two rows", "citation": "check_plan_json.py", "cluster": "dgx-a100",
                 "flops": "narayanan",
                 "rule": {"text": "Narayanan's", "seq": 2048, "vocab": 51200, "sequence_parallel": False,
                          "dtype": "f16", "grad_dtype": "f16", "zero": 0, "recompute": "full", "dropout": 0.1,
                          "streaming_attention": False, "gradient_accumulation_fusion": False,
                          "grad_nan_check": False,
                          "overlap": {"dp_gradients": False, "pp_p2p": False, "tp_comm": False,
                                      "param_gather": False, "tp_backward": False}},
                 "columns": ["params_billions", "heads", "hidden", "layers", "tp", "pp", "gpus", "batch",
                             "tflops_per_gpu", "percent_of_peak"],
                 "setup_source": "run_table_1.sh",
                 "rows": [[18.4, 48, 6144, 40, 8, 1, 256, 1024, 135, 43, {"micro_batch": 8, "dp_overlap": True}],
                          [1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163, 52, {"micro_batch": 1, "chunks": 1}]]}
        mine = os.path.join(tmp, "mine.json")
        with open(mine, "w") as f:
            json.dump(table, f)
        got = subprocess.run([mdtp, "plan", "--validate", "--table", mine, "--json"], capture_output=True, text=True,
                             timeout=600)
        if got.returncode != 0:
            sys.exit(f"--table {mine} exited with {got.returncode}: {got.stderr}")
        rows = json.loads(got.stdout)[0]["rows"]
        want = [narayanan["rows"][3]["predicted_tflops_per_gpu"], narayanan["rows"][9]["predicted_tflops_per_gpu"]]
        if [r["predicted_tflops_per_gpu"] for r in rows] != want:
            sys.exit(f"the user's table predicts {[r['predicted_tflops_per_gpu'] for r in rows]}, the shipped {want}")
        # The optional switch left out above is Megatron's default (unfused); fused, every row is faster.
        table["rule"]["cross_entropy_fusion"] = True
        fused = os.path.join(tmp, "fused.json")
        with open(fused, "w") as f:
            json.dump(table, f)
        got = subprocess.run([mdtp, "plan", "--validate", "--table", fused, "--json"], capture_output=True, text=True,
                             timeout=600)
        faster = [r["predicted_tflops_per_gpu"] for r in json.loads(got.stdout)[0]["rows"]]
        if got.returncode != 0 or not all(f > w for f, w in zip(faster, want)):
            sys.exit(f"cross_entropy_fusion true predicts {faster} against {want} unfused")
        del table["rule"]["cross_entropy_fusion"]
        table["rule"]["zero"] = 5
        broken = os.path.join(tmp, "broken.json")
        with open(broken, "w") as f:
            json.dump(table, f)
        bad = subprocess.run([mdtp, "plan", "--validate", "--table", "narayanan-2021", "--table", broken],
                             capture_output=True, text=True, timeout=600)
        lines = bad.stderr.strip().splitlines()
        if bad.returncode != 2 or bad.stdout or len(lines) != 1 or "'rule.zero'" not in lines[0]:
            sys.exit(f"a broken table: exit {bad.returncode}, stdout {bad.stdout[:200]!r}, stderr {bad.stderr!r}")


def step_seconds(mdtp, command, flags):
    r = subprocess.run([mdtp, command] + flags, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"mdtp {command} {' '.join(flags)} exited with {r.returncode}: {r.stderr.strip()}")
    doc = json.loads(r.stdout)
    return doc["step_s"] if command == "cost" else doc["configs"][0]["step_s"]


def check_switches(mdtp):
    """The planner prices what it is asked: each switch as `mdtp cost` prices it, none dropped on the way."""
    for mode, switch, beside in SWITCHES:
        flags = SWITCH_LAYOUT + ["--tp-mode", mode] + beside
        plain = step_seconds(mdtp, "cost", flags)
        cost = step_seconds(mdtp, "cost", flags + switch)
        plan = step_seconds(mdtp, "plan", flags + switch + ["--top", "1"])
        print(f"{mode} {' '.join(beside + switch)}: cost {cost:.9g} s, plan {plan:.9g} s, without it {plain:.9g} s")
        if abs(plan - cost) > 1e-12 * cost:
            sys.exit(f"{' '.join(switch)}: mdtp plan prices {plan} s, mdtp cost {cost} s")
        if cost == plain:
            sys.exit(f"{' '.join(switch)}: the step time does not move ({cost} s): not a test of the switch")


def check_zero_options(mdtp):
    """A ZeRO option without --zero fixes the stages it applies to; the rest of the search goes on."""
    search = FORMS["search"][1]
    for option, allowed in (("--zero-keep-params", {(3, True)}),
                            ("--zero-reduce-per-micro-batch", {(2, True), (3, True)}),
                            ("--zero-offload", {(1, True), (2, True), (3, True)})):
        r = subprocess.run([mdtp, "plan"] + search + [option], capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            sys.exit(f"mdtp plan {option} exited with {r.returncode}: {r.stderr.strip()}")
        key = {"--zero-keep-params": "zero_keep_parameters", "--zero-offload": "zero_offload"}.get(
            option, "zero_reduce_per_micro_batch")
        seen = {(e["config"]["zero"], e["config"][key]) for e in json.loads(r.stdout)["configs"]}
        print(f"{option}: (zero, {key}) ranked: {sorted(seen)}")
        if not seen or not seen <= allowed:
            sys.exit(f"mdtp plan {option} ranked {sorted(seen)}; expected only {sorted(allowed)}")


def main():
    mdtp, form = sys.argv[1], sys.argv[2]
    if form == "switches":
        check_switches(mdtp)
        check_zero_options(mdtp)
        print("ok")
        return
    command, flags = FORMS[form]
    result = subprocess.run([mdtp, command] + flags, capture_output=True, text=True, timeout=600)
    print(result.stdout[-3000:], result.stderr[-3000:])
    if result.returncode != 0:
        sys.exit(f"mdtp {command} exited with {result.returncode}")
    doc = json.loads(result.stdout)
    if form == "one":
        check_estimate(doc, "one configuration")
        if not 100 < doc["tflops_per_gpu"] < 250:
            sys.exit(f"the 1T row predicts {doc['tflops_per_gpu']} TFLOP/s per GPU")
        bound = doc.get("data_sheet_bound", {})
        if not (bound.get("step_s", 0) < doc["step_s"] and doc["tflops_per_gpu"] < bound.get("tflops_per_gpu", 0)
                and doc["mfu"] < bound.get("mfu", 0) <= 1):
            sys.exit(f"the data-sheet bound {bound} is not faster than the prediction ({doc['step_s']} s)")
    elif form == "fixed":
        if not doc["configs"]:
            sys.exit("the search with the 1T row's layout fixed ranks no configuration")
        for i, e in enumerate(doc["configs"]):
            check_estimate(e, f"configs[{i}]")
            differs = {k: e["config"].get(k) for k, v in FIXED_1T.items() if e["config"].get(k) != v}
            if differs:
                sys.exit(f"configs[{i}] leaves the fixed layout {FIXED_1T}: {differs}")
        steps = [e["step_s"] for e in doc["configs"]]
        if steps != sorted(steps):
            sys.exit(f"not ranked by step time: {steps}")
        if not 100 < doc["configs"][0]["tflops_per_gpu"] < 250:
            sys.exit(f"the quickest 1T configuration predicts {doc['configs'][0]['tflops_per_gpu']} TFLOP/s per GPU")
    elif form == "search":
        if not doc["configs"] or len(doc["configs"]) > 3:
            sys.exit(f"expected 1 to 3 configurations, got {len(doc['configs'])}")
        for i, e in enumerate(doc["configs"]):
            check_estimate(e, f"configs[{i}]")
        steps = [e["step_s"] for e in doc["configs"]]
        if steps != sorted(steps):
            sys.exit(f"not ranked by step time: {steps}")
    else:
        # One object per shipped table; Narayanan's within the prediction issue's worst bound (25 %)
        # with its measured order kept, every table with its source, rule, cluster, Spearman, pair
        # order and one row per measured run.
        tables = {t["table"]: t for t in doc}
        if set(tables) != {"korthikanti-2022", "narayanan-2021", "megatron-h100", "megatron-h100-strong"}:
            sys.exit(f"validation tables: {sorted(tables)}")
        for key, t in tables.items():
            for field in ("citation", "rule", "cluster", "spearman", "mean_abs_error", "distinct_pairs",
                          "distinct_pairs_ordered"):
                if field not in t:
                    sys.exit(f"validation {key}: no '{field}'")
            # Each model's configurations: every row in exactly one model, each model its own order.
            if "models" not in t or sum(m["configurations"] for m in t["models"]) != len(t["rows"]):
                sys.exit(f"validation {key}: the models do not partition the rows")
            for m in t["models"]:
                for field in ("layers", "hidden", "heads", "spearman", "distinct_pairs", "distinct_pairs_ordered"):
                    if field not in m:
                        sys.exit(f"validation {key}: a model without '{field}'")
                rows = [r for r in t["rows"] if (r["layers"], r["hidden"], r["heads"]) ==
                        (m["layers"], m["hidden"], m["heads"])]
                if len(rows) != m["configurations"]:
                    sys.exit(f"validation {key}: model {m} counts {m['configurations']} of {len(rows)} rows")
            if not all(0 < r["predicted_tflops_per_gpu"] for r in t["rows"]):
                sys.exit(f"validation {key}: a prediction is not positive")
            if not all(r["predicted_tflops_per_gpu"] < r["data_sheet_bound_tflops_per_gpu"] for r in t["rows"]):
                sys.exit(f"validation {key}: a prediction above its data-sheet bound")
        n = tables["narayanan-2021"]
        if len(n["rows"]) != 10 or n["max_error"] > 0.25 or n["cluster"] != "dgx-a100":
            sys.exit(f"validation: {len(n['rows'])} rows, max error {n['max_error']} on {n['cluster']}")
        if n["distinct_pairs_ordered"] != n["distinct_pairs"]:
            sys.exit(f"validation: {n['distinct_pairs_ordered']} of {n['distinct_pairs']} distinct pairs in order")
        if len(tables["megatron-h100"]["rows"]) != 9 or tables["megatron-h100"]["cluster"] != "dgx-h100":
            sys.exit("validation: the H100 table has 9 rows, predicted on dgx-h100")
        strong = tables["megatron-h100-strong"]
        if len(strong["rows"]) != 8 or strong["cluster"] != "dgx-h100" or len(strong["models"]) != 1:
            sys.exit("validation: the H100 strong scaling has 8 rows of one model, predicted on dgx-h100")
        if strong["models"][0]["configurations"] != 8 or strong["models"][0]["spearman"] < 0.8:
            sys.exit(f"validation: the strong scaling's one model: {strong['models'][0]}")
        if len(tables["korthikanti-2022"]["rows"]) != 4 or tables["korthikanti-2022"]["cluster"] != "dgx-a100":
            sys.exit("validation: the sequence-parallel A100 table has 4 rows, predicted on dgx-a100")
        check_table_files(mdtp, n)
    print("ok")


if __name__ == "__main__":
    main()
