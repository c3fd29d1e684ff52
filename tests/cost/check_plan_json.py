#!/usr/bin/env python3
"""`mdtp plan --json` parses and has its keys (tests/cost/tests.cmake registers each form).

  check_plan_json.py MDTP one       one configuration (the 1T row of Narayanan et al. 2021)
  check_plan_json.py MDTP search    a ranked search, --top 3
  check_plan_json.py MDTP validate  the validation table
"""
import json
import subprocess
import sys

ESTIMATE_KEYS = ["step_s", "tokens_per_s", "tflops_per_gpu", "mfu", "hfu", "memory_per_gpu_bytes", "fits", "time",
                 "memory", "config", "placement"]
TIME_KEYS = ["compute_s", "tp_comm_s", "pp_comm_s", "dp_comm_s", "bubble_s", "optimizer_s"]
MEMORY_KEYS = ["parameters_bytes", "parameters_gathered_bytes", "gradients_bytes", "gradients_in_step_bytes"]
CONFIG_KEYS = ["zero", "zero_reduce_per_micro_batch", "zero_keep_parameters"]
MODEL = ["--layers", "128", "--hidden", "25600", "--heads", "160", "--seq", "2048", "--vocab", "51200"]
FORMS = {
    "one": MODEL + ["--global-batch", "3072", "--micro-batch", "1", "--tp-mode", "1d", "--tp", "8", "--pp", "64",
                    "--gpus", "3072", "--schedule", "interleaved", "--chunks", "2", "--recompute", "full",
                    "--dtype", "bf16", "--cluster", "dgx-a100", "--json"],
    "search": ["--layers", "8", "--hidden", "1024", "--heads", "16", "--seq", "512", "--vocab", "8192",
               "--global-batch", "32", "--gpus", "16", "--top", "3", "--json"],
    "validate": ["--validate", "--json"],
}


def check_estimate(e, where):
    missing = [k for k in ESTIMATE_KEYS if k not in e] + [f"time.{k}" for k in TIME_KEYS if k not in e.get("time", {})]
    missing += [f"memory.{k}" for k in MEMORY_KEYS if k not in e.get("memory", {})]
    missing += [f"config.{k}" for k in CONFIG_KEYS if k not in e.get("config", {})]
    if missing:
        sys.exit(f"{where}: missing keys {missing}")
    split = sum(e["time"][k] for k in TIME_KEYS)
    if abs(split - e["step_s"]) > 1e-9 * e["step_s"]:
        sys.exit(f"{where}: the time split {split} does not add up to step_s {e['step_s']}")
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


def main():
    mdtp, form = sys.argv[1], sys.argv[2]
    result = subprocess.run([mdtp, "plan"] + FORMS[form], capture_output=True, text=True, timeout=600)
    print(result.stdout[-3000:], result.stderr[-3000:])
    if result.returncode != 0:
        sys.exit(f"mdtp plan exited with {result.returncode}")
    doc = json.loads(result.stdout)
    if form == "one":
        check_estimate(doc, "one configuration")
        if not 100 < doc["tflops_per_gpu"] < 250:
            sys.exit(f"the 1T row predicts {doc['tflops_per_gpu']} TFLOP/s per GPU")
    elif form == "search":
        if not doc["configs"] or len(doc["configs"]) > 3:
            sys.exit(f"expected 1 to 3 configurations, got {len(doc['configs'])}")
        for i, e in enumerate(doc["configs"]):
            check_estimate(e, f"configs[{i}]")
        steps = [e["step_s"] for e in doc["configs"]]
        if steps != sorted(steps):
            sys.exit(f"not ranked by step time: {steps}")
    else:
        if len(doc["rows"]) != 10 or doc["max_error"] > 0.10:
            sys.exit(f"validation: {len(doc['rows'])} rows, max error {doc['max_error']}")
    print("ok")


if __name__ == "__main__":
    main()
