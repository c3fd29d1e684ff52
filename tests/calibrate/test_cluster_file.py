#!/usr/bin/env python3
"""`mdtp calibrate --cluster-out` writes the machine as a cluster file that `mdtp plan` reads.

    test_cluster_file.py --mdtp BIN --mpiexec MPIEXEC --dir DIR

Runs a short calibration on 2 ranks, then checks the cluster file against the calibrate run it
came from (read back with h5py): the link α equal to the fitted one, the bandwidth 1/β, the peak
per dtype the measured GEMM rate (efficiency 1), one device per rank on the node; then plans on it
with the layout fixed (1d tp 2), and checks that a malformed --peak-flops is refused before any
collective.
"""
import argparse
import json
import os
import subprocess
import sys

import h5py


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mdtp", required=True)
    p.add_argument("--mpiexec", required=True)
    p.add_argument("--dir", required=True)
    a = p.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    h5, cluster = os.path.join(a.dir, "calibration.h5"), os.path.join(a.dir, "machine.json")
    for path in (h5, cluster):
        if os.path.exists(path):
            os.remove(path)
    run = subprocess.run([a.mpiexec, "-n", "2", a.mdtp, "calibrate", "--max-bytes", "256K", "--iters", "3",
                          "--warmup", "1", "--gemm-size", "128", "--allow-oversubscribed", "--out", h5,
                          "--cluster-out", cluster, "--cluster-name", "test-machine"],
                         capture_output=True, text=True, timeout=300)
    failures = []
    if run.returncode != 0:
        print(run.stdout, run.stderr)
        return 1
    doc = json.load(open(cluster))
    with h5py.File(h5, "r") as f:
        group = f["runs"][sorted(f["runs"].keys())[-1]]
        links = {row["link"].decode(): row for row in group["link_params"][()]}
        gemm = {row["dtype"].decode(): row["flops_mean"] for row in group["gemm_rates"][()]}
    intra = links["intra-node"]
    got = doc["links"]["intra_node"]
    if got["alpha"] != intra["alpha_s"]:
        failures.append(f"intra-node alpha {got['alpha']} != fitted {intra['alpha_s']}")
    if abs(got["bandwidth"] * intra["beta_s_per_byte"] - 1.0) > 1e-12 or got["efficiency"] != 1.0:
        failures.append(f"intra-node bandwidth {got['bandwidth']} is not 1/beta = {1 / intra['beta_s_per_byte']}")
    for dtype, rate in gemm.items():
        if abs(doc["gpu"]["peak_flops"][dtype] / rate - 1.0) > 1e-12:
            failures.append(f"peak {dtype} {doc['gpu']['peak_flops'][dtype]} != measured {rate}")
    if doc["gpu"]["gemm_efficiency"] != 1.0 or doc["gpus_per_node"] != 2 or doc["name"] != "test-machine":
        failures.append(f"gemm_efficiency {doc['gpu']['gemm_efficiency']}, gpus_per_node {doc['gpus_per_node']}, "
                        f"name {doc['name']}")
    if not (doc["gpu"]["hbm_bytes"] > 0 and doc["gpu"]["hbm_bandwidth"] > 0):
        failures.append("no memory figures")
    plan = subprocess.run([a.mdtp, "plan", "--cluster", cluster, "--layers", "4", "--hidden", "128", "--heads", "8",
                           "--seq", "64", "--vocab", "65", "--global-batch", "8", "--gpus", "2", "--dtype", "f32",
                           "--tp-mode", "1d", "--tp", "2", "--json"], capture_output=True, text=True, timeout=60)
    if plan.returncode != 0:
        failures.append(f"mdtp plan on the cluster file: exit {plan.returncode}: {plan.stderr.strip()}")
    else:
        # A search with the layout fixed (--tp-mode 1d --tp 2): its configurations, on this cluster.
        ranking = json.loads(plan.stdout)
        configs = ranking["configs"]
        if ranking["cluster"] != "test-machine" or not configs or not all(c["step_s"] > 0 for c in configs) \
                or any((c["config"]["tp_mode"], c["config"]["tp"]) != ("1d", 2) for c in configs):
            failures.append(f"plan: cluster {ranking['cluster']}, configurations "
                            f"{[(c['config']['tp_mode'], c['config']['tp'], c['step_s']) for c in configs]}")
    bad = subprocess.run([a.mpiexec, "-n", "2", a.mdtp, "calibrate", "--peak-flops", "f32:1e12", "--out", h5,
                          "--cluster-out", cluster], capture_output=True, text=True, timeout=120)
    lines = [l for l in bad.stderr.splitlines() if "error" in l]
    # Once for the job (rank 0), naming the value.
    if bad.returncode != 2 or len(lines) != 1 or not all("--peak-flops" in l and "f32:1e12" in l for l in lines):
        failures.append(f"a malformed --peak-flops: exit {bad.returncode}, stderr {bad.stderr!r}")
    for f in failures:
        print("FAILED:", f)
    print("cluster file checks:", "passed" if not failures else f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
