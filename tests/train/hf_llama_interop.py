#!/usr/bin/env python3
"""mdtp and Hugging Face transformers exchange Llama weights through safetensors, with no script in
between: transformers' LlamaForCausalLM loads mdtp's file with no missing, unexpected or
mismatched key, mdtp loads save_pretrained's, and the first losses agree in f64 (≤ 1e-12 relative).

transformers computes three steps of its Llama in float32 even in a float64 model (the RoPE angles,
the RMSNorm input, the softmax); the comparison runs it with those steps in float64
(llama_numpy_port.hf_float64, the same formulas) and prints the stock model's difference beside it.

  hf_llama_interop.py --mdtp BUILD/mdtp [--mpiexec mpiexec] [--corpus data/corpus.txt]

Needs torch and transformers (PyPI) and h5py: exit status 77 (skipped) where they are missing.
"""
import argparse
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
try:
    import h5py
    import numpy as np
    import torch
    import torch.nn.functional as F
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging as hf_logging
except ImportError as e:
    print(f"hf_llama_interop: {e}; skipped (needs torch, transformers and h5py)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "model"))
import llama_numpy_port as port  # noqa: E402

SEQ, BATCH = 16, 4
TOLERANCE = 1e-12


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mdtp", required=True)
    p.add_argument("--mpiexec", default="mpiexec")
    p.add_argument("--corpus", default=os.path.join(HERE, "..", "..", "data", "corpus.txt"))
    return p.parse_args()


def first_batch(corpus):
    data = open(corpus, "rb").read()
    ids = {b: i for i, b in enumerate(sorted(set(data)))}
    rows = [[ids[data[r * SEQ + t]] for t in range(SEQ + 1)] for r in range(BATCH)]
    return torch.tensor([r[:-1] for r in rows]), torch.tensor([r[1:] for r in rows]), len(ids)


def hf_losses(model, x, y):
    """(float64-patched, stock) cross entropies of the model on x → y."""
    model.eval()
    with torch.no_grad():
        stock = model(x).logits.double()
        try:
            patched = port.hf_float64(model)(x).logits.double()
        finally:
            port.restore_hf_attention()
    ce = lambda logits: F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item()  # noqa: E731
    return ce(patched), ce(stock)


def mdtp_first_loss(args, init_from, out_dir):
    results = os.path.join(out_dir, "loss.h5")
    if os.path.exists(results):
        os.remove(results)
    subprocess.run([args.mpiexec, "-n", "2", args.mdtp, "train", "--model", "llama", "--tp-mode", "1d", "--tp", "2",
                    "--dtype", "f64", "--global-batch", str(BATCH), "--steps", "1", "--init-from", init_from,
                    "--out", results], check=True, stdout=subprocess.DEVNULL)
    with h5py.File(results, "r") as f:
        return float(f["runs"][sorted(f["runs"].keys())[-1]]["steps"]["loss"][0])


def compare(label, mdtp, hf, failures):
    reference, stock = hf
    err = abs(mdtp - reference) / abs(reference)
    ok = err <= TOLERANCE
    print(f"{label:<44} mdtp {mdtp:.15f}  transformers {reference:.15f}  rel {err:.2e}  "
          f"(stock transformers {abs(mdtp - stock) / abs(stock):.1e})  {'ok' if ok else 'FAIL'}")
    if not ok:
        failures.append(label)


def main():
    args = parse()
    hf_logging.set_verbosity_error()
    torch.manual_seed(0)
    x, y, vocab = first_batch(args.corpus)
    failures = []
    with tempfile.TemporaryDirectory(prefix="mdtp-hf-llama-") as tmp:
        # 1. mdtp -> transformers.
        saved = os.path.join(tmp, "from-mdtp")
        subprocess.run([args.mpiexec, "-n", "2", args.mdtp, "train", "--model", "llama", "--tp-mode", "1d", "--tp", "2",
                        "--dtype", "f64", "--layers", "2", "--hidden", "48", "--heads", "4", "--kv-heads", "2",
                        "--ffn-hidden", "40", "--rope-theta", "500", "--seq", str(SEQ), "--global-batch", str(BATCH),
                        "--steps", "3", "--save", os.path.join(saved, "model.safetensors")],
                       check=True, stdout=subprocess.DEVNULL)
        model, info = LlamaForCausalLM.from_pretrained(saved, dtype=torch.float64, attn_implementation="eager",
                                                       output_loading_info=True)
        for kind in ("missing_keys", "unexpected_keys", "mismatched_keys"):
            if info[kind]:
                print(f"transformers reports {kind} loading mdtp's file: {info[kind]}")
                failures.append(kind)
        compare("mdtp --save -> LlamaForCausalLM", mdtp_first_loss(args, os.path.join(saved, "model.safetensors"), tmp),
                hf_losses(model, x, y), failures)

        # 2. transformers -> mdtp (norm weights moved off 1 so that they count).
        config = LlamaConfig(vocab_size=vocab, hidden_size=48, intermediate_size=44, num_hidden_layers=3,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=SEQ,
                             rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=False)
        model = LlamaForCausalLM(config).to(torch.float64)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "norm" in name:
                    p.add_(0.1 * torch.randn_like(p))
        model.config._attn_implementation = "eager"
        reference = hf_losses(model, x, y)
        one = os.path.join(tmp, "one")
        model.save_pretrained(one)
        compare("save_pretrained (F64) -> mdtp", mdtp_first_loss(args, os.path.join(one, "model.safetensors"), tmp),
                reference, failures)
        shards = os.path.join(tmp, "shards")
        model.save_pretrained(shards, max_shard_size="60KB")
        index = os.path.join(shards, "model.safetensors.index.json")
        if os.path.exists(index):
            count = len([f for f in os.listdir(shards) if f.endswith(".safetensors")])
            compare(f"save_pretrained, {count} shards + index -> mdtp", mdtp_first_loss(args, index, tmp), reference,
                    failures)
        else:
            print("save_pretrained wrote no index for max_shard_size=60KB")
            failures.append("shards")
        half = os.path.join(tmp, "bf16")
        model.to(torch.bfloat16).save_pretrained(half)
        compare("save_pretrained (BF16) -> mdtp (f64)", mdtp_first_loss(args, os.path.join(half, "model.safetensors"), tmp),
                hf_losses(model.double(), x, y), failures)
    print(f"transformers {__import__('transformers').__version__}, torch {torch.__version__}")
    if failures:
        print("FAILED:", ", ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
