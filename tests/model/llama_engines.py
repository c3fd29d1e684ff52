#!/usr/bin/env python3
"""The Llama blocks under the pipeline and ZeRO engines, in every tensor-parallel mode, through
`mdtp train` in f64: the first step's loss and every gradient (--dump-grads, full tensors in
Hugging Face's names) equal the serial run's (mode none, one rank, no pipeline, no ZeRO) to
1e-12 (‖Δ‖∞/‖ref‖∞ per tensor), tied and untied heads, grouped-query attention (4 heads, 2 K/V).

  llama_engines.py --mdtp BUILD/mdtp [--mpiexec mpiexec] [--max-ranks 8]
"""
import argparse
import os
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
except ImportError as e:
    print(f"llama_engines: {e}; skipped (needs numpy and h5py)")
    sys.exit(77)

TOLERANCE = 1e-12
MODEL = ["--model", "llama", "--dtype", "f64", "--layers", "4", "--hidden", "24", "--heads", "4", "--kv-heads", "2",
         "--ffn-hidden", "20", "--seq", "8", "--global-batch", "8", "--steps", "1"]
# (ranks, label, flags): every mode, a pipeline in each where the world allows one, ZeRO 1-3.
CASES = [
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
]


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mdtp", required=True)
    p.add_argument("--mpiexec", default="mpiexec")
    p.add_argument("--max-ranks", type=int, default=8)
    return p.parse_args()


def run(args, ranks, flags, tmp, name):
    grads, out = os.path.join(tmp, name + "-grads.h5"), os.path.join(tmp, name + "-out.h5")
    subprocess.run([args.mpiexec, "-n", str(ranks), args.mdtp, "train"] + MODEL + flags +
                   ["--dump-grads", grads, "--out", out], check=True, stdout=subprocess.DEVNULL)
    with h5py.File(grads, "r") as f:
        tensors = {k: np.asarray(f[k]) for k in f.keys()}
    with h5py.File(out, "r") as f:
        loss = float(f["runs"][sorted(f["runs"].keys())[-1]]["steps"]["loss"][0])
    return loss, tensors


def main():
    args = parse()
    failures = []
    with tempfile.TemporaryDirectory(prefix="mdtp-llama-engines-") as tmp:
        refs = {tied: run(args, 1, ["--tp-mode", "none"] + (["--tie-embeddings"] if tied else []), tmp, f"ref{tied}")
                for tied in (False, True)}
        for i, (ranks, label, flags) in enumerate(CASES):
            if ranks > args.max_ranks:
                continue
            ref_loss, ref = refs["--tie-embeddings" in flags]
            loss, grads = run(args, ranks, flags, tmp, f"case{i}")
            loss_err = abs(loss - ref_loss) / abs(ref_loss)
            missing = sorted(set(ref) ^ set(grads))
            worst, worst_name = 0.0, ""
            for name, g in ref.items():
                if name in grads:
                    e = float(np.max(np.abs(grads[name] - g)) / max(np.max(np.abs(g)), 1e-300))
                    if e >= worst:
                        worst, worst_name = e, name
            ok = loss_err <= TOLERANCE and worst <= TOLERANCE and not missing
            print(f"{label:<52} ranks {ranks}: loss {loss_err:.2e}, gradients {worst:.2e} ({worst_name}) "
                  f"{'ok' if ok else 'FAIL'}{' tensors differ: ' + str(missing) if missing else ''}")
            if not ok:
                failures.append(label)
    if failures:
        print("FAILED:", "; ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
