#!/usr/bin/env python3
"""Gathers the logs of benchmarks/gpu/run_all.sh into gpu_results.h5 (one group per measurement,
for analysis in Python) and summary.md (what a reader of docs/GPU.md needs: the device, the
stages, the GEMM ratios against bare cuBLAS, the tests, the train parity and the MFU).

    collect.py --logs DIR --stages stages.tsv --out DIR
"""
import argparse
import os
import re

import h5py
import numpy as np


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def gemm_rows(text):
    rows = []
    for m in re.finditer(r"^(f32|tf32|f64|bf16|f16)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$", text,
                         re.M):
        rows.append((m[1], int(m[2]), int(m[3]), int(m[4]), float(m[5]), float(m[6]), float(m[7])))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--logs", required=True)
    ap.add_argument("--stages", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    log = {os.path.splitext(n)[0]: read(os.path.join(a.logs, n)) for n in os.listdir(a.logs) if n.endswith(".log")}
    stages = [line.split("\t") for line in read(a.stages).splitlines()[1:] if line.strip()]
    facts = log.get("facts", "")
    device = facts.splitlines()[1] if len(facts.splitlines()) > 1 else "unknown"

    md = ["# mdtp GPU run", "", f"Device (nvidia-smi): `{device}`", "", "| stage | status | seconds |",
          "|---|---|---|"]
    md += [f"| {s[0]} | {s[1]} | {s[2]} |" for s in stages]

    gemm = []
    for name in ("gemm_bf16", "gemm_f32", "gemm_tf32"):
        gemm += gemm_rows(log.get(name, ""))
    if gemm:
        md += ["", "## GEMM: CudaBackend::gemm against the same cuBLAS call", "",
               "| dtype | m | n | k | backend TFLOP/s | cuBLAS TFLOP/s | ratio |", "|---|---|---|---|---|---|---|"]
        md += [f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]:.1f} | {r[5]:.1f} | {r[6]:.3f} |" for r in gemm]

    ctest = log.get("ctest_gpu", "")
    summary = re.search(r"(\d+)% tests passed, (\d+) tests failed out of (\d+)", ctest)
    skipped = re.findall(r"\*\*\*Skipped|Not Run", ctest)
    if summary:
        md += ["", f"## ctest -L gpu", "", f"{summary[3]} tests ran, {summary[2]} failed, {len(skipped)} skipped."]
        md += ["", "```"] + [l for l in ctest.splitlines() if re.search(r"Test +#\d+:", l)] + ["```"]

    parity = [l for l in log.get("train_parity", "").splitlines() + log.get("resume", "").splitlines()
              if re.search(r": (ok|FAIL)", l) or "failed" in l]
    if parity:
        md += ["", "## mdtp train: device against host, one step, per tensor ||d||inf/||ref||inf", "", "```"] + parity + ["```"]

    gpt = []
    for name in sorted(log):
        if name.startswith(("gpt_", "train_cuda", "torch_gpt")):
            lines = [l for l in log[name].splitlines() if re.search(r"MFU|model:|peak per GPU|ms/step|step ", l)]
            if lines:
                gpt.append((name, lines))
    if gpt:
        md += ["", "## GPT training steps on the device", ""]
        for name, lines in gpt:
            md += [f"**{name}**", "", "```"] + lines[-8:] + ["```", ""]

    kernels = {}
    for name in sorted(log):
        if name.startswith("kernels_"):
            rows = [(m[1].strip(), float(m[2]), float(m[3]), float(m[4]), float(m[5]), float(m[6])) for m in re.finditer(
                r"^(\S.*?\])\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$", log[name], re.M)]
            rows += [(m[1].strip(), float(m[2]), float(m[3]), float(m[4]), float(m[5]), float(m[6])) for m in re.finditer(
                r"^(adamw \d+ params)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$", log[name], re.M)]
            if rows:
                kernels[name] = rows
    for name, rows in kernels.items():
        md += ["", f"## {name}: streaming kernels against a device copy of the same bytes", "",
               "| op | MB | ms | GB/s | copy GB/s | ratio |", "|---|---|---|---|---|---|"]
        md += [f"| {r[0]} | {r[1]:.1f} | {r[2]:.4f} | {r[3]:.0f} | {r[4]:.0f} | {r[5]:.3f} |" for r in rows]

    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write("\n".join(md) + "\n")

    with h5py.File(os.path.join(a.out, "gpu_results.h5"), "w") as h:
        h.attrs["device"] = device
        h.attrs["facts"] = facts
        g = h.create_group("stages")
        for s in stages:
            g.attrs[s[0]] = f"{s[1]} ({s[2]} s)"
        if gemm:
            gg = h.create_group("gemm")
            gg.create_dataset("dtype", data=np.array([r[0] for r in gemm], dtype="S8"))
            gg.create_dataset("mnk", data=np.array([r[1:4] for r in gemm], dtype=np.int64))
            gg.create_dataset("backend_tflops", data=np.array([r[4] for r in gemm]))
            gg.create_dataset("cublas_tflops", data=np.array([r[5] for r in gemm]))
            gg.create_dataset("ratio", data=np.array([r[6] for r in gemm]))
        sweep = gemm_rows(log.get("gemm_sweep_bf16", ""))
        if sweep:
            gs = h.create_group("gemm_sweep")
            gs.attrs["about"] = "bf16 GEMM rates over transformer layer shapes (8192 tokens), backend and bare cuBLAS"
            gs.create_dataset("mnk", data=np.array([r[1:4] for r in sweep], dtype=np.int64))
            gs.create_dataset("backend_tflops", data=np.array([r[4] for r in sweep]))
            gs.create_dataset("cublas_tflops", data=np.array([r[5] for r in sweep]))
        for name, lines in gpt:
            gp = h.create_group(f"gpt/{name}")
            gp.attrs["output"] = "\n".join(lines)
            m = re.search(r"([\d.]+) ms/step.*?([\d.]+) model TFLOP/s.*?MFU ([\d.]+)% of ([\d.]+)", "\n".join(lines))
            if m:
                gp.attrs["ms_per_step"], gp.attrs["model_tflops"] = float(m[1]), float(m[2])
                gp.attrs["mfu_percent"], gp.attrs["peak_tflops"] = float(m[3]), float(m[4])
        for name, rows in kernels.items():
            gk = h.create_group(f"kernels/{name}")
            gk.create_dataset("op", data=np.array([r[0] for r in rows], dtype="S64"))
            gk.create_dataset("megabytes", data=np.array([r[1] for r in rows]))
            gk.create_dataset("ms", data=np.array([r[2] for r in rows]))
            gk.create_dataset("gb_per_s", data=np.array([r[3] for r in rows]))
            gk.create_dataset("copy_gb_per_s", data=np.array([r[4] for r in rows]))
            gk.create_dataset("ratio_to_copy", data=np.array([r[5] for r in rows]))
        h.attrs["ctest"] = "\n".join(l for l in ctest.splitlines() if "Test" in l or "tests" in l)
        h.attrs["train_parity"] = "\n".join(parity)
    print(f"collect.py: wrote {a.out}/summary.md and {a.out}/gpu_results.h5")


if __name__ == "__main__":
    main()
