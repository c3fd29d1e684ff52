#!/usr/bin/env python3
"""GPT-2 checkpoints in Hugging Face's shapes, written with numpy and the format's spec only (not
the safetensors or transformers libraries), for test_hf_checkpoint:

  write_hf_gpt2.py WEIGHTS.json DIR

WEIGHTS.json (from the C++ test) lists every parameter in mdtp's layout ([out, in] for Linear
weights) with exact hexadecimal values.  Written:

  DIR/hub/model.safetensors, config.json
      as the hub's gpt2 files are: keys without the "transformer." prefix, the four Conv1D weights
      transposed to [in, out], the causal-mask buffers h.<i>.attn.bias (F32 [1, 1, T, T]) and
      h.<i>.attn.masked_bias (a scalar), and lm_head.weight equal to wte; every second tensor in
      F64, the rest in F32 (the values are f32, so both are exact); GPT-2's published config.json
      fields (dropouts 0.1, n_ctx, ...).
  DIR/sharded/model-0000{1,2}-of-00002.safetensors, model.safetensors.index.json, config.json
      as transformers' save_pretrained shards them: keys with the prefix, no lm_head, the tensors
      split in two files named by the index's weight_map, data in reverse header order in the
      second shard (the spec orders data by offsets, not by header order).
"""
import json
import os
import struct
import sys

import numpy as np

CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def write_file(path, tensors, reverse_data=False):
    """tensors: list of (name, numpy array); little-endian data, offsets from the data start."""
    header = {"__metadata__": {"format": "pt"}}
    order = list(reversed(tensors)) if reverse_data else tensors
    offset, blobs = 0, []
    for name, array in order:
        raw = array.astype(array.dtype.newbyteorder("<")).tobytes()
        dtype = {"float32": "F32", "float64": "F64"}[array.dtype.name]
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def main():
    weights_path, out = sys.argv[1], sys.argv[2]
    with open(weights_path) as f:
        weights = json.load(f)
    params = {}
    for t in weights:
        values = np.array([float.fromhex(v) for v in t["values"]], dtype=np.float64).reshape(t["shape"])
        if t["name"].endswith(CONV1D):
            values = values.T.copy()
        params[t["name"]] = values
    vocab, embd = params["transformer.wte.weight"].shape
    positions = params["transformer.wpe.weight"].shape[0]
    layers = len({k.split(".")[2] for k in params if k.startswith("transformer.h.")})
    heads = int(os.environ.get("HF_HEADS", "4"))
    config = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
              "bos_token_id": 0, "embd_pdrop": 0.1, "eos_token_id": 0, "initializer_range": 0.02,
              "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": positions, "n_embd": embd,
              "n_head": heads, "n_layer": layers, "n_positions": positions, "resid_pdrop": 0.1,
              "summary_activation": None, "summary_first_dropout": 0.1, "summary_proj_to_labels": True,
              "summary_type": "cls_index", "summary_use_proj": True, "vocab_size": vocab}

    hub = os.path.join(out, "hub")
    os.makedirs(hub, exist_ok=True)
    tensors = []
    for i, (name, array) in enumerate(params.items()):
        tensors.append((name[len("transformer."):], array.astype(np.float64 if i % 2 else np.float32)))
    mask = np.tril(np.ones((positions, positions), dtype=np.float32)).reshape(1, 1, positions, positions)
    for layer in range(layers):
        tensors.append((f"h.{layer}.attn.bias", mask))
        tensors.append((f"h.{layer}.attn.masked_bias", np.array(-1e4, dtype=np.float32)))
    tensors.append(("lm_head.weight", params["transformer.wte.weight"].astype(np.float32)))
    write_file(os.path.join(hub, "model.safetensors"), tensors)
    with open(os.path.join(hub, "config.json"), "w") as f:
        json.dump(config, f, indent=2)

    sharded = os.path.join(out, "sharded")
    os.makedirs(sharded, exist_ok=True)
    names = list(params)
    half = len(names) // 2
    weight_map = {}
    for shard, part in enumerate((names[:half], names[half:]), start=1):
        file = f"model-{shard:05d}-of-00002.safetensors"
        write_file(os.path.join(sharded, file), [(n, params[n].astype(np.float32)) for n in part],
                   reverse_data=shard == 2)
        weight_map.update({n: file for n in part})
    total = sum(params[n].size * 4 for n in names)
    with open(os.path.join(sharded, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(sharded, "config.json"), "w") as f:
        json.dump(config, f, indent=2)


if __name__ == "__main__":
    main()
