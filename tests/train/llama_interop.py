#!/usr/bin/env python3
"""mdtp's Llama moves to and from Hugging Face's LlamaForCausalLM state dict with no script in
between, and its loss equals an independent numpy port of transformers' modeling_llama
(tests/model/llama_numpy_port.py) on the same weights and tokens, in f64 (≤ 1e-12 relative).
Only numpy and h5py: the safetensors files are read and written here from the format's spec.

  llama_interop.py --mdtp BUILD/mdtp [--mpiexec mpiexec] [--corpus data/corpus.txt]

  1. mdtp -> numpy: `mdtp train --model llama --save a/model.safetensors` (1D, tp 2, GQA 4 heads / 2
     kv, three AdamW steps) writes exactly LlamaForCausalLM's keys (q/k/v_proj, gate/up_proj apart)
     and a LlamaConfig config.json; the numpy port's loss on the first batch from those weights
     equals `mdtp train --init-from a/model.safetensors`'s first loss; the same run saved as HDF5
     holds the same tensors under the same names, bit for bit, and reloads to the same loss.
  2. numpy -> mdtp: random weights written as one F64 file, as two shards behind
     model.safetensors.index.json, and bare (LlamaModel's keys without "model.", tied head) load
     into mdtp (2D on 4 ranks for one of them; one K/V head copied on the 4 ranks of 1D tp 4 for
     another, which saves it back once, the same values) and give the port's loss.
  3. mdtp --save x.safetensors, reloaded and saved again without a step (--steps 0): the same bytes.
  4. Refused in one line, nothing loaded: a missing tensor, an extra tensor, a wrong shape, an integer
     dtype, rope_scaling, attention_bias.
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
except ImportError as e:
    print(f"llama_interop: {e}; skipped (needs numpy and h5py)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "model"))
import llama_numpy_port as port  # noqa: E402

SEQ, BATCH = 16, 4
TOLERANCE = 1e-12
DTYPES = {"F64": np.float64, "F32": np.float32, "I64": np.int64}


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
    x = np.array([row[:-1] for row in rows])
    y = np.array([row[1:] for row in rows])
    return x, y, len(ids)


def read_safetensors(path):
    """The format from its spec: 8-byte little-endian header length, the JSON header, the data."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype=DTYPES[e["dtype"]]).reshape(e["shape"])
    return out, header.get("__metadata__", {})


def write_safetensors(path, tensors, dtype="F64"):
    header, chunks, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, value in tensors.items():
        raw = np.ascontiguousarray(value, dtype=DTYPES[dtype]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(value.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def write_model(directory, cfg, state, dtype="F64", shards=1):
    os.makedirs(directory, exist_ok=True)
    json.dump(dict(cfg, model_type="llama", architectures=["LlamaForCausalLM"]), open(os.path.join(directory, "config.json"), "w"))
    if shards == 1:
        path = os.path.join(directory, "model.safetensors")
        write_safetensors(path, state, dtype)
        return path
    names = list(state)
    cut = len(names) // 2
    weight_map = {}
    for k, part in enumerate((names[:cut], names[cut:])):
        file = f"model-{k + 1:05d}-of-00002.safetensors"
        write_safetensors(os.path.join(directory, file), {n: state[n] for n in part}, dtype)
        weight_map.update({n: file for n in part})
    index = os.path.join(directory, "model.safetensors.index.json")
    json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, open(index, "w"))
    return index


def run_mdtp(args, ranks, extra, check=True):
    cmd = [args.mpiexec, "-n", str(ranks), args.mdtp, "train", "--model", "llama", "--dtype", "f64",
           "--global-batch", str(BATCH)] + extra
    return subprocess.run(cmd, check=check, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def mdtp_first_loss(args, init_from, out_dir, ranks=2, layout=("--tp-mode", "1d", "--tp", "2")):
    results = os.path.join(out_dir, "loss.h5")
    if os.path.exists(results):
        os.remove(results)
    run_mdtp(args, ranks, list(layout) + ["--steps", "1", "--init-from", init_from, "--out", results])
    with h5py.File(results, "r") as f:
        run = sorted(f["runs"].keys())[-1]
        return float(f["runs"][run]["steps"]["loss"][0])


def compare(label, mdtp, ref, failures):
    err = abs(mdtp - ref) / abs(ref)
    ok = err <= TOLERANCE
    print(f"{label:<52} mdtp {mdtp:.15f}  numpy port {ref:.15f}  rel {err:.2e}  {'ok' if ok else 'FAIL'}")
    if not ok:
        failures.append(label)


def expect_refusal(args, label, init_from, needle, failures):
    r = run_mdtp(args, 1, ["--tp-mode", "none", "--steps", "1", "--init-from", init_from], check=False)
    lines = [l for l in r.stdout.splitlines() if needle in l]
    ok = r.returncode != 0 and len(lines) >= 1 and "step     1" not in r.stdout
    print(f"refused: {label:<40} {'ok' if ok else 'FAIL'}  {lines[0].strip() if lines else r.stdout.strip()[-200:]}")
    if not ok:
        failures.append("refusal: " + label)


def main():
    args = parse()
    x, y, vocab = first_batch(args.corpus)
    failures = []
    with tempfile.TemporaryDirectory(prefix="mdtp-llama-") as tmp:
        # 1. mdtp -> numpy.
        shape = ["--layers", "2", "--hidden", "48", "--heads", "4", "--kv-heads", "2", "--ffn-hidden", "40",
                 "--seq", str(SEQ), "--rope-theta", "500", "--norm-eps", "1e-6", "--tp-mode", "1d", "--tp", "2"]
        saved = os.path.join(tmp, "from-mdtp")
        run_mdtp(args, 2, shape + ["--steps", "3", "--save", os.path.join(saved, "model.safetensors")])
        h5 = os.path.join(tmp, "from-mdtp.h5")
        run_mdtp(args, 2, shape + ["--steps", "3", "--save", h5])
        state, meta = read_safetensors(os.path.join(saved, "model.safetensors"))
        cfg = json.load(open(os.path.join(saved, "config.json")))
        expected = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}
        for i in range(2):
            b = f"model.layers.{i}."
            expected |= {b + k + ".weight" for k in ("input_layernorm", "post_attention_layernorm", "self_attn.q_proj",
                                                     "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                                     "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")}
        if set(state) != expected or meta.get("format") != "pt" or cfg.get("model_type") != "llama":
            print(f"mdtp's safetensors keys differ from LlamaForCausalLM's: {sorted(set(state) ^ expected)}, "
                  f"metadata {meta}, model_type {cfg.get('model_type')}")
            failures.append("keys")
        with h5py.File(h5, "r") as f:
            same = all(name in f and np.array_equal(np.asarray(f[name]), state[name]) for name in expected)
            extra = [k for k in f.keys() if k not in expected and k != "optim"]
        print(f"HDF5 checkpoint: Hugging Face's names, the safetensors file's values bit for bit: "
              f"{'ok' if same and not extra else 'FAIL'} {extra}")
        if not same or extra:
            failures.append("hdf5 names")
        reference = port.llama_loss(state, cfg, x, y.reshape(-1))
        compare("mdtp --save (safetensors) -> numpy port", mdtp_first_loss(args, os.path.join(saved, "model.safetensors"), tmp),
                reference, failures)
        # The HDF5 checkpoint resumes the run (optimizer state, data position): its first loss is the
        # fourth of an uninterrupted run.
        through = os.path.join(tmp, "through.h5")
        run_mdtp(args, 2, shape + ["--steps", "4", "--out", through])
        with h5py.File(through, "r") as f:
            fourth = float(f["runs"][sorted(f["runs"].keys())[-1]]["steps"]["loss"][3])
        resumed = mdtp_first_loss(args, h5, tmp)
        ok = resumed == fourth
        print(f"{'mdtp --save (HDF5) -> resumed, vs step 4 of one run':<52} {resumed:.15f} vs {fourth:.15f}  "
              f"{'bitwise ok' if ok else 'FAIL'}")
        if not ok:
            failures.append("hdf5 resume")

        # 2. numpy -> mdtp.
        rng = np.random.default_rng(7)
        cfg = port.small_config(vocab_size=vocab, max_position_embeddings=SEQ, num_hidden_layers=3,
                                intermediate_size=44, num_key_value_heads=2)
        state = port.random_state(cfg, rng)
        reference = port.llama_loss(state, cfg, x, y.reshape(-1))
        one = write_model(os.path.join(tmp, "one"), cfg, state)
        compare("numpy F64 file (kv 2) -> mdtp 1d tp 2", mdtp_first_loss(args, one, tmp), reference, failures)
        compare("numpy F64 file (kv 2) -> mdtp 2d tp 4",
                mdtp_first_loss(args, one, tmp, 4, ("--tp-mode", "2d", "--tp", "4")), reference, failures)
        cfg1 = dict(cfg, num_key_value_heads=1)
        state1 = port.random_state(cfg1, rng)
        kv1 = write_model(os.path.join(tmp, "kv1"), cfg1, state1)
        reference1 = port.llama_loss(state1, cfg1, x, y.reshape(-1))
        compare("numpy F64 file (kv 1) -> mdtp serial", mdtp_first_loss(args, kv1, tmp, 1, ("--tp-mode", "none")),
                reference1, failures)
        # One K/V head and 4 ranks splitting the heads: every rank holds a copy of it.
        compare("numpy F64 file (kv 1) -> mdtp 1d tp 4 (4 copies)",
                mdtp_first_loss(args, kv1, tmp, 4, ("--tp-mode", "1d", "--tp", "4")), reference1, failures)
        copies = os.path.join(tmp, "kv1-copies")
        run_mdtp(args, 4, ["--tp-mode", "1d", "--tp", "4", "--steps", "0", "--init-from", kv1, "--save",
                           os.path.join(copies, "model.safetensors")])
        written, _ = read_safetensors(os.path.join(copies, "model.safetensors"))
        same = set(written) == set(state1) and all(np.array_equal(written[k], state1[k]) for k in state1)
        label = "kv 1 on tp 4 --save: one k/v_proj per layer, the file's values"
        print(f"{label:<52} {'ok' if same else 'FAIL'}")
        if not same:
            failures.append("kv copies save")
        index = write_model(os.path.join(tmp, "shards"), cfg, state, shards=2)
        compare("numpy, 2 shards + index -> mdtp", mdtp_first_loss(args, index, tmp), reference, failures)
        tied_cfg = dict(cfg, tie_word_embeddings=True, num_key_value_heads=2)
        tied = {k[len("model."):] if k.startswith("model.") else k: v
                for k, v in port.random_state(tied_cfg, rng).items() if k != "lm_head.weight"}
        with_prefix = {("model." + k): v for k, v in tied.items()}
        bare = write_model(os.path.join(tmp, "bare"), tied_cfg, tied)
        compare("LlamaModel keys (no prefix, tied) -> mdtp", mdtp_first_loss(args, bare, tmp),
                port.llama_loss(with_prefix, tied_cfg, x, y.reshape(-1)), failures)

        # 3. Saved, reloaded and saved again without a change: the same bytes.
        again = os.path.join(tmp, "again")
        run_mdtp(args, 2, ["--tp-mode", "1d", "--tp", "2", "--steps", "0", "--init-from",
                           os.path.join(saved, "model.safetensors"), "--save", os.path.join(again, "model.safetensors")])
        a = open(os.path.join(saved, "model.safetensors"), "rb").read()
        b = open(os.path.join(again, "model.safetensors"), "rb").read()
        print(f"--save, --init-from, --save (no step): {'the same bytes' if a == b else 'FAIL: the files differ'}")
        if a != b:
            failures.append("reload bitwise")

        # 4. Refusals, one line each, before anything loads.
        def variant(name, edit_state=None, edit_cfg=None):
            s = dict(state)
            c = dict(cfg)
            if edit_state:
                edit_state(s)
            if edit_cfg:
                edit_cfg(c)
            return write_model(os.path.join(tmp, name), c, s)
        expect_refusal(args, "missing k_proj", variant("missing", lambda s: s.pop("model.layers.1.self_attn.k_proj.weight")),
                       "has no tensor 'model.layers.1.self_attn.k_proj.weight'", failures)
        expect_refusal(args, "extra tensor", variant("extra", lambda s: s.update({"model.layers.0.mlp.extra.weight": np.zeros((2, 2))})),
                       "holds 'model.layers.0.mlp.extra.weight', which is not a tensor", failures)
        expect_refusal(args, "wrong shape", variant("shape", lambda s: s.update({"model.layers.0.mlp.up_proj.weight": np.zeros((40, 48))})),
                       "tensor 'model.layers.0.mlp.up_proj.weight' has shape [40, 48]", failures)
        ints = os.path.join(tmp, "ints")
        os.makedirs(ints, exist_ok=True)
        shutil.copy(os.path.join(tmp, "one", "config.json"), ints)
        write_safetensors(os.path.join(ints, "model.safetensors"), state, "I64")
        expect_refusal(args, "integer dtype", os.path.join(ints, "model.safetensors"), "has dtype I64", failures)
        expect_refusal(args, "rope_scaling", variant("scaling", edit_cfg=lambda c: c.update(rope_scaling={"type": "linear", "factor": 2.0})),
                       "rope_scaling", failures)
        expect_refusal(args, "attention_bias", variant("bias", edit_cfg=lambda c: c.update(attention_bias=True)),
                       "attention_bias true is not implemented", failures)
    if failures:
        print("FAILED:", ", ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
