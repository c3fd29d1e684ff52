#!/usr/bin/env python3
"""A model family under the pipeline and ZeRO engines, in every tensor-parallel mode, through
`mdtp train` in f64: the first step's loss and every gradient (--dump-grads, full tensors in
Hugging Face's names) equal the serial run's (mode none, one rank, no pipeline, no ZeRO) to
1e-12 (‖Δ‖∞/‖ref‖∞ per tensor); and mdtp train's own audit says every (phase, group, op) of the
ledger equals the byte plan and every memory figure the model.

  --model llama (default): tied and untied heads, grouped-query attention (4 heads, 2 K/V, and
    1 K/V head copied on the ranks that split the heads).
  --model gpt2: the GPT-2 with an LM head of its own (--untie-embeddings, Megatron-LM's
    --untie-embeddings-and-output-weights): lm_head.weight on the last stage, trained apart.

  model_engines.py --mdtp BUILD/mdtp [--model llama|gpt2] [--mpiexec mpiexec] [--max-ranks 8]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
except ImportError as e:
    print(f"model_engines: {e}; skipped (needs numpy and h5py)")
    sys.exit(77)

TOLERANCE = 1e-12
COMMON = ["--dtype", "f64", "--layers", "4", "--hidden", "24", "--heads", "4", "--seq", "8", "--global-batch", "8",
          "--steps", "1"]
LLAMA = ["--model", "llama", "--ffn-hidden", "20"] + COMMON
KV = ["--kv-heads", "2"]  # unless a case names its own
# (ranks, label, flags): every mode, a pipeline in each where the world allows one, ZeRO 1-3.
LLAMA_CASES = [
    (4, "1d tp 2, pp 2 1f1b m 4, zero 3", ["--tp-mode", "1d", "--tp", "2", "--pp", "2", "--schedule", "1f1b",
                                           "--micro-batches", "4", "--zero", "3"]),
    (4, "1d-sp tp 2, pp 2 zb-h1 m 4, zero 1, tied", ["--tp-mode", "1d-sp", "--tp", "2", "--pp", "2", "--schedule",
                                                     "zb-h1", "--micro-batches", "4", "--zero", "1", "--tie-embeddings"]),
    (8, "2d tp 4, pp 2 gpipe m 2, zero 3", ["--tp-mode", "2d", "--tp", "4", "--pp", "2", "--schedule", "gpipe",
                                            "--micro-batches", "2", "--zero", "3"]),
    (8, "2.5d tp 4 d 1, pp 2 interleaved m 2, zero 2, tied",
     ["--tp-mode", "2.5d", "--tp", "4", "--tp-depth", "1", "--pp", "2", "--schedule", "interleaved", "--chunks", "2",
      "--micro-batches", "2", "--zero", "2", "--tie-embeddings"]),
    (8, "3d tp 8, zero 3", ["--tp-mode", "3d", "--tp", "8", "--zero", "3"]),
    (4, "none, pp 2 dualpipev m 4, zero 3, dp 2", ["--tp-mode", "none", "--pp", "2", "--schedule", "dualpipev",
                                             "--micro-batches", "4", "--zero", "3"]),
    # One K/V head on more ranks than it: each rank that splits the heads holds a copy (tp.kv).
    (4, "1d tp 4 kv 1 (4 copies), zero 2, m 2", ["--kv-heads", "1", "--tp-mode", "1d", "--tp", "4", "--zero", "2",
                                                 "--micro-batches", "2"]),
    (8, "2d tp 4 kv 1 (2 copies), pp 2 1f1b m 4, zero 3", ["--kv-heads", "1", "--tp-mode", "2d", "--tp", "4", "--pp",
                                                           "2", "--schedule", "1f1b", "--micro-batches", "4",
                                                           "--zero", "3"]),
    (8, "3d tp 8 kv 1 (2 copies), zero 1, tied", ["--kv-heads", "1", "--tp-mode", "3d", "--tp", "8", "--zero", "1",
                                                  "--tie-embeddings"]),
]
# The untied GPT-2: every mode, a pipeline with the head on the other stage than the embedding.
GPT2 = ["--model", "gpt2", "--untie-embeddings"] + COMMON
GPT2_CASES = [
    (4, "1d-sp tp 2, pp 2 zb-h1 m 4, zero 1", ["--tp-mode", "1d-sp", "--tp", "2", "--pp", "2", "--schedule", "zb-h1",
                                              "--micro-batches", "4", "--zero", "1"]),
    (8, "2d tp 4, pp 2 interleaved m 2, zero 3", ["--tp-mode", "2d", "--tp", "4", "--pp", "2", "--schedule",
                                                  "interleaved", "--chunks", "2", "--micro-batches", "2", "--zero", "3"]),
    (8, "2.5d tp 8 d 2, zero 2", ["--tp-mode", "2.5d", "--tp", "8", "--tp-depth", "2", "--zero", "2"]),
    (8, "3d tp 8, zero 1", ["--tp-mode", "3d", "--tp", "8", "--zero", "1"]),
    (4, "none, pp 2 dualpipev m 4, zero 3, dp 2", ["--tp-mode", "none", "--pp", "2", "--schedule", "dualpipev",
                                                   "--micro-batches", "4", "--zero", "3"]),
]


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mdtp", required=True)
    p.add_argument("--mpiexec", default="mpiexec")
    p.add_argument("--max-ranks", type=int, default=8)
    p.add_argument("--model", choices=("llama", "gpt2"), default="llama")
    return p.parse_args()


def kv_of(args, flags):
    if args.model == "gpt2":
        return None  # multi-head attention only
    return flags[flags.index("--kv-heads") + 1] if "--kv-heads" in flags else KV[1]


def run(args, ranks, flags, tmp, name):
    grads, out = os.path.join(tmp, name + "-grads.h5"), os.path.join(tmp, name + "-out.h5")
    model = GPT2 if args.model == "gpt2" else LLAMA + ([] if "--kv-heads" in flags else KV)
    report = subprocess.run([args.mpiexec, "-n", str(ranks), args.mdtp, "train"] + model + flags +
                            ["--dump-grads", grads, "--out", out], check=True, stdout=subprocess.PIPE, text=True).stdout
    with h5py.File(grads, "r") as f:
        tensors = {k: np.asarray(f[k]) for k in f.keys()}
    with h5py.File(out, "r") as f:
        loss = float(f["runs"][sorted(f["runs"].keys())[-1]]["steps"]["loss"][0])
    return loss, tensors, audit(report)


def audit(report):
    """What mdtp train's own audit printed: every (phase, group, op) of the ledger equal to the byte
    plan, and each memory figure equal to the model's."""
    comm = re.search(r"communication per step: (\d+) of (\d+) \(phase, group, op\) equal the model", report)
    memory = re.findall(r"(\d+) B(?: on rank \d+)?, model (\d+) B", report)
    problems = []
    if not comm or comm.group(1) != comm.group(2):
        problems.append("ledger != plan: " + (comm.group(0) if comm else "no communication line"))
    if not memory or any(a != b for a, b in memory):
        problems.append(f"memory != model: {memory}")
    return problems


def main():
    args = parse()
    failures = []
    with tempfile.TemporaryDirectory(prefix="mdtp-llama-engines-") as tmp:
        cases = GPT2_CASES if args.model == "gpt2" else LLAMA_CASES
        kvs = sorted({kv_of(args, flags) for _, _, flags in cases}, key=str)
        ties = (False,) if args.model == "gpt2" else (False, True)
        refs = {(tied, kv): run(args, 1, ["--tp-mode", "none"] + (["--kv-heads", kv] if kv else []) +
                                (["--tie-embeddings"] if tied else []), tmp, f"ref{tied}{kv}")
                for tied in ties for kv in kvs}
        for i, (ranks, label, flags) in enumerate(cases):
            if ranks > args.max_ranks:
                continue
            ref_loss, ref, _ = refs[("--tie-embeddings" in flags, kv_of(args, flags))]
            loss, grads, problems = run(args, ranks, flags, tmp, f"case{i}")
            loss_err = abs(loss - ref_loss) / abs(ref_loss)
            missing = sorted(set(ref) ^ set(grads))
            worst, worst_name = 0.0, ""
            for name, g in ref.items():
                if name in grads:
                    e = float(np.max(np.abs(grads[name] - g)) / max(np.max(np.abs(g)), 1e-300))
                    if e >= worst:
                        worst, worst_name = e, name
            ok = loss_err <= TOLERANCE and worst <= TOLERANCE and not missing and not problems
            print(f"{label:<52} ranks {ranks}: loss {loss_err:.2e}, gradients {worst:.2e} ({worst_name}), "
                  f"ledger = plan, memory = model: {'; '.join(problems) if problems else 'yes'} "
                  f"{'ok' if ok else 'FAIL'}{' tensors differ: ' + str(missing) if missing else ''}")
            if not ok:
                failures.append(label)
    if failures:
        print("FAILED:", "; ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
