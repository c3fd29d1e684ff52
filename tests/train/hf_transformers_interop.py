#!/usr/bin/env python3
"""mdtp and Hugging Face transformers exchange GPT-2 weights through safetensors, with no script in
between: the first loss of one equals the other's on the same tokens, in f64 (≤ 1e-12 relative).

  hf_transformers_interop.py --mdtp BUILD/mdtp [--mpiexec mpiexec] [--corpus data/corpus.txt]

  1. mdtp -> transformers: `mdtp train --save a/model.safetensors` (1D, tp 2, three AdamW steps);
     GPT2LMHeadModel.from_pretrained(a) reports no missing, unexpected or mismatched key, and its
     loss on the first global batch equals that of `mdtp train --init-from a/model.safetensors`.
  2. transformers -> mdtp: a randomly initialised GPT2LMHeadModel saved with save_pretrained as
     one F64 file, as shards behind model.safetensors.index.json, in bf16 (read by mdtp with
     conversion; transformers' loss then from the bf16 weights widened to f64), and from the bare
     GPT2Model (keys without "transformer.", no lm_head) loads into `mdtp train --init-from` and
     gives transformers' loss.
  3. An untied head both ways: GPT2LMHeadModel(tie_word_embeddings=False) -> mdtp, and
     `mdtp train --untie-embeddings --save` -> GPT2LMHeadModel (lm_head.weight its own tensor).

Needs torch and transformers (PyPI) and h5py: exit status 77 (skipped) where they are missing.
"""
import argparse
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TQDM_DISABLE", "1")  # transformers' progress bars
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is local
try:
    import h5py
    import torch
    import torch.nn.functional as F
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging
except ImportError as e:
    print(f"hf_transformers_interop: {e}; skipped (needs torch, transformers and h5py)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
SEQ, BATCH = 16, 4
TOLERANCE = 1e-12


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mdtp", required=True)
    p.add_argument("--mpiexec", default="mpiexec")
    p.add_argument("--corpus", default=os.path.join(HERE, "..", "..", "data", "corpus.txt"))
    return p.parse_args()


def first_batch(corpus):
    """mdtp's character corpus (io/token_data.cpp): ids by sorted byte value, rows of SEQ + 1 bytes
    overlapping by one; the first step takes rows 0 … BATCH - 1."""
    data = open(corpus, "rb").read()
    ids = {b: i for i, b in enumerate(sorted(set(data)))}
    rows = [[ids[data[r * SEQ + t]] for t in range(SEQ + 1)] for r in range(BATCH)]
    x = torch.tensor([row[:-1] for row in rows])
    y = torch.tensor([row[1:] for row in rows])
    return x, y, len(ids)


def hf_loss(model, x, y):
    model.eval()
    with torch.no_grad():
        logits = model(x).logits.double()
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item()


def mdtp_first_loss(args, init_from, out_dir):
    results = os.path.join(out_dir, "loss.h5")
    if os.path.exists(results):
        os.remove(results)
    subprocess.run([args.mpiexec, "-n", "2", args.mdtp, "train", "--tp-mode", "1d", "--tp", "2", "--dtype", "f64",
                    "--global-batch", str(BATCH), "--steps", "1", "--init-from", init_from, "--out", results], check=True, stdout=subprocess.DEVNULL)
    with h5py.File(results, "r") as f:
        run = sorted(f["runs"].keys())[-1]
        return float(f["runs"][run]["steps"]["loss"][0])


def compare(label, mdtp, hf, failures):
    err = abs(mdtp - hf) / abs(hf)
    ok = err <= TOLERANCE
    print(f"{label:<44} mdtp {mdtp:.15f}  transformers {hf:.15f}  rel {err:.2e}  {'ok' if ok else 'FAIL'}")
    if not ok:
        failures.append(label)


def main():
    args = parse()
    hf_logging.set_verbosity_error()
    torch.manual_seed(0)
    x, y, vocab = first_batch(args.corpus)
    failures = []
    with tempfile.TemporaryDirectory(prefix="mdtp-hf-") as tmp:
        # 1. mdtp -> transformers.
        saved = os.path.join(tmp, "from-mdtp")
        subprocess.run([args.mpiexec, "-n", "2", args.mdtp, "train", "--tp-mode", "1d", "--tp", "2", "--dtype", "f64",
                        "--layers", "2", "--hidden", "48", "--heads", "4", "--seq", str(SEQ), "--global-batch",
                        str(BATCH), "--steps", "3", "--save", os.path.join(saved, "model.safetensors")],
                       check=True, stdout=subprocess.DEVNULL)
        model, info = GPT2LMHeadModel.from_pretrained(saved, torch_dtype=torch.float64, output_loading_info=True)
        for kind in ("missing_keys", "unexpected_keys", "mismatched_keys"):
            if info[kind]:
                print(f"transformers reports {kind} loading mdtp's file: {info[kind]}")
                failures.append(kind)
        compare("mdtp --save -> GPT2LMHeadModel", mdtp_first_loss(args, os.path.join(saved, "model.safetensors"), tmp),
                hf_loss(model, x, y), failures)

        # 2. transformers -> mdtp.
        config = GPT2Config(vocab_size=vocab, n_positions=SEQ, n_embd=48, n_layer=3, n_head=4, resid_pdrop=0.0,
                            embd_pdrop=0.0, attn_pdrop=0.0)
        model = GPT2LMHeadModel(config).double()
        reference = hf_loss(model, x, y)
        one = os.path.join(tmp, "one")
        model.save_pretrained(one)
        compare("save_pretrained (F64) -> mdtp", mdtp_first_loss(args, os.path.join(one, "model.safetensors"), tmp),
                reference, failures)
        shards = os.path.join(tmp, "shards")
        model.save_pretrained(shards, max_shard_size="40KB")
        index = os.path.join(shards, "model.safetensors.index.json")
        if not os.path.exists(index):
            print("save_pretrained wrote no index for max_shard_size=40KB")
            failures.append("shards")
        else:
            count = len([f for f in os.listdir(shards) if f.endswith(".safetensors")])
            compare(f"save_pretrained, {count} shards + index -> mdtp", mdtp_first_loss(args, index, tmp), reference,
                    failures)
        bare = os.path.join(tmp, "bare")
        model.transformer.save_pretrained(bare)
        compare("GPT2Model (no prefix, no lm_head) -> mdtp", mdtp_first_loss(args, os.path.join(bare, "model.safetensors"), tmp),
                reference, failures)
        half = os.path.join(tmp, "bf16")
        model.to(torch.bfloat16).save_pretrained(half)
        compare("save_pretrained (BF16) -> mdtp (f64)", mdtp_first_loss(args, os.path.join(half, "model.safetensors"), tmp),
                hf_loss(model.double(), x, y), failures)

        # 3. An untied head, both ways: GPT2LMHeadModel with tie_word_embeddings=False, whose
        #    lm_head.weight is a tensor of its own, and mdtp train --untie-embeddings.
        untied_config = GPT2Config(vocab_size=vocab, n_positions=SEQ, n_embd=48, n_layer=2, n_head=4, resid_pdrop=0.0,
                                   embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=False)
        untied = GPT2LMHeadModel(untied_config).double()
        untied_dir = os.path.join(tmp, "untied")
        untied.save_pretrained(untied_dir)
        compare("save_pretrained, untied head -> mdtp",
                mdtp_first_loss(args, os.path.join(untied_dir, "model.safetensors"), tmp), hf_loss(untied, x, y),
                failures)
        from_mdtp = os.path.join(tmp, "from-mdtp-untied")
        subprocess.run([args.mpiexec, "-n", "2", args.mdtp, "train", "--tp-mode", "1d", "--tp", "2", "--dtype", "f64",
                        "--layers", "2", "--hidden", "48", "--heads", "4", "--seq", str(SEQ), "--global-batch",
                        str(BATCH), "--steps", "3", "--untie-embeddings", "--save",
                        os.path.join(from_mdtp, "model.safetensors")], check=True, stdout=subprocess.DEVNULL)
        model, info = GPT2LMHeadModel.from_pretrained(from_mdtp, torch_dtype=torch.float64, output_loading_info=True)
        for kind in ("missing_keys", "unexpected_keys", "mismatched_keys"):
            if info[kind]:
                print(f"transformers reports {kind} loading mdtp's untied file: {info[kind]}")
                failures.append("untied " + kind)
        if model.config.tie_word_embeddings or torch.equal(model.lm_head.weight, model.transformer.wte.weight):
            print("mdtp's untied file loads as a tied GPT2LMHeadModel")
            failures.append("untied head")
        compare("mdtp --untie-embeddings --save -> GPT2LMHeadModel",
                mdtp_first_loss(args, os.path.join(from_mdtp, "model.safetensors"), tmp), hf_loss(model, x, y), failures)
    print(f"transformers {__import__('transformers').__version__}, torch {torch.__version__}")
    if failures:
        print("FAILED:", ", ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
