#!/usr/bin/env python3
"""A numpy-only, float64 port of Hugging Face transformers' Llama forward (modeling_llama:
LlamaRMSNorm, LlamaRotaryEmbedding, rotate_half, apply_rotary_pos_emb, repeat_kv,
eager_attention_forward, LlamaMLP, LlamaDecoderLayer, LlamaModel, LlamaForCausalLM), written the
way transformers writes it so that it is a second reference beside the plain-loop C++ one
(tests/support/llama_reference.hpp), which was written from the maths rather than from this code.

  from llama_numpy_port import llama_logits, llama_loss
  llama_logits(state, cfg, input_ids)      # [B, T, vocab]
  llama_loss(state, cfg, input_ids, targets)  # mean cross entropy over B·T tokens

state: the checkpoint's names (model.embed_tokens.weight, model.layers.<i>.self_attn.q_proj.weight,
..., lm_head.weight; Linear weights [out, in]); cfg: config.json's names.  No biases (Llama's
attention_bias and mlp_bias are false), rope_type "default", no KV cache, no padding mask.

One deliberate difference: whatever the model's dtype, transformers computes RoPE's inv_freq,
angles, cos and sin in float32, casts LlamaRMSNorm's input to float32, and takes the eager
attention softmax in float32, so a float64 LlamaForCausalLM is only float32-accurate (about 1e-7
relative in the logits).  This port keeps float64 throughout, as the C++ reference does; the
self-check therefore compares against transformers with those three steps patched to float64
(same formulas), and prints the unpatched figure too.

  llama_numpy_port.py                      the self-check against transformers (exit 77 without
                                           torch and transformers)
  llama_numpy_port.py --write-case FILE [KV_HEADS [TIED [SEED]]]
                                           a small random case, with this port's loss, for a
                                           standalone C++ build of llama_reference.hpp (format in
                                           write_case)
"""
import sys

import numpy as np


def rms_norm(hidden_states, weight, eps):
    # LlamaRMSNorm.forward, minus its float32 cast.
    variance = np.mean(hidden_states ** 2, axis=-1, keepdims=True)
    hidden_states = hidden_states * (1.0 / np.sqrt(variance + eps))
    return weight * hidden_states


def rope_cos_sin(cfg, position_ids):
    # LlamaRotaryEmbedding: compute_default_rope_parameters and forward, in float64.
    base = float(cfg["rope_theta"])
    dim = head_dim(cfg)
    inv_freq = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.int64).astype(np.float64) / dim))
    freqs = position_ids[..., None].astype(np.float64) * inv_freq  # [B, T, dim/2]
    emb = np.concatenate((freqs, freqs), axis=-1)
    return np.cos(emb), np.sin(emb)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return np.concatenate((-x2, x1), axis=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    cos = cos[:, None, :, :]  # unsqueeze_dim=1: broadcast over heads
    sin = sin[:, None, :, :]
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, hd = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = np.broadcast_to(hidden_states[:, :, None, :, :], (batch, num_key_value_heads, n_rep, slen, hd))
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, hd)


def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def head_dim(cfg):
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def linear(x, weight):
    return x @ weight.T  # nn.Linear without bias: weight [out, in]


def attention(state, prefix, cfg, hidden_states, cos, sin):
    # LlamaAttention.forward with eager_attention_forward and the causal mask create_causal_mask
    # builds (0 on and below the diagonal, the dtype's minimum above).
    bsz, seq, _ = hidden_states.shape
    hd = head_dim(cfg)
    n_rep = cfg["num_attention_heads"] // cfg["num_key_value_heads"]
    hidden_shape = (bsz, seq, -1, hd)
    query_states = linear(hidden_states, state[prefix + "q_proj.weight"]).reshape(hidden_shape).transpose(0, 2, 1, 3)
    key_states = linear(hidden_states, state[prefix + "k_proj.weight"]).reshape(hidden_shape).transpose(0, 2, 1, 3)
    value_states = linear(hidden_states, state[prefix + "v_proj.weight"]).reshape(hidden_shape).transpose(0, 2, 1, 3)
    query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)

    key_states = repeat_kv(key_states, n_rep)
    value_states = repeat_kv(value_states, n_rep)
    scaling = hd ** -0.5
    attn_weights = np.matmul(query_states, key_states.transpose(0, 1, 3, 2)) * scaling
    causal_mask = np.triu(np.full((seq, seq), np.finfo(np.float64).min), k=1)
    attn_weights = attn_weights + causal_mask
    attn_weights = softmax(attn_weights, axis=-1)
    attn_output = np.matmul(attn_weights, value_states).transpose(0, 2, 1, 3)
    attn_output = attn_output.reshape(bsz, seq, -1)
    return linear(attn_output, state[prefix + "o_proj.weight"])


def silu(x):
    return x / (1.0 + np.exp(-x))


def mlp(state, prefix, x):
    gate = linear(x, state[prefix + "gate_proj.weight"])
    up = linear(x, state[prefix + "up_proj.weight"])
    return linear(silu(gate) * up, state[prefix + "down_proj.weight"])


def llama_logits(state, cfg, input_ids):
    """LlamaForCausalLM(input_ids).logits, float64: [B, T] ids -> [B, T, vocab_size]."""
    state = {k: np.asarray(v, dtype=np.float64) for k, v in state.items()}
    input_ids = np.asarray(input_ids, dtype=np.int64)
    bsz, seq = input_ids.shape
    if cfg.get("max_position_embeddings") is not None:
        assert seq <= cfg["max_position_embeddings"], "sequence longer than max_position_embeddings"
    eps = float(cfg["rms_norm_eps"])
    hidden_states = state["model.embed_tokens.weight"][input_ids]
    position_ids = np.broadcast_to(np.arange(seq)[None, :], (bsz, seq))
    cos, sin = rope_cos_sin(cfg, position_ids)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        residual = hidden_states
        hidden_states = rms_norm(hidden_states, state[p + "input_layernorm.weight"], eps)
        hidden_states = attention(state, p + "self_attn.", cfg, hidden_states, cos, sin)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = rms_norm(hidden_states, state[p + "post_attention_layernorm.weight"], eps)
        hidden_states = mlp(state, p + "mlp.", hidden_states)
        hidden_states = residual + hidden_states
    hidden_states = rms_norm(hidden_states, state["model.norm.weight"], eps)
    head = state["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else state["lm_head.weight"]
    return linear(hidden_states, head)


def llama_loss(state, cfg, input_ids, targets):
    """Mean cross entropy of llama_logits over every token (targets [B, T], no ignore index)."""
    logits = llama_logits(state, cfg, input_ids).reshape(-1, cfg["vocab_size"])
    targets = np.asarray(targets, dtype=np.int64).reshape(-1)
    mx = np.max(logits, axis=-1)
    lse = mx + np.log(np.sum(np.exp(logits - mx[:, None]), axis=-1))
    return float(np.mean(lse - logits[np.arange(len(targets)), targets]))


def random_state(cfg, rng, scale=0.2):
    """Random parameters under the checkpoint's names (norm weights near 1, others N(0, scale²))."""
    h, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    nh, nkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], head_dim(cfg)
    s = {"model.embed_tokens.weight": rng.normal(0, scale, (v, h)),
         "model.norm.weight": 1.0 + rng.normal(0, 0.1, h)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        s[p + "input_layernorm.weight"] = 1.0 + rng.normal(0, 0.1, h)
        s[p + "self_attn.q_proj.weight"] = rng.normal(0, scale, (nh * hd, h))
        s[p + "self_attn.k_proj.weight"] = rng.normal(0, scale, (nkv * hd, h))
        s[p + "self_attn.v_proj.weight"] = rng.normal(0, scale, (nkv * hd, h))
        s[p + "self_attn.o_proj.weight"] = rng.normal(0, scale, (h, nh * hd))
        s[p + "post_attention_layernorm.weight"] = 1.0 + rng.normal(0, 0.1, h)
        s[p + "mlp.gate_proj.weight"] = rng.normal(0, scale, (f, h))
        s[p + "mlp.up_proj.weight"] = rng.normal(0, scale, (f, h))
        s[p + "mlp.down_proj.weight"] = rng.normal(0, scale, (h, f))
    if not cfg.get("tie_word_embeddings"):
        s["lm_head.weight"] = rng.normal(0, scale, (v, h))
    return s


def write_case(path, cfg, state, input_ids, targets):
    """A cross-check case for a standalone C++ program, as text with exact hexadecimal floats:

      shape LAYERS HIDDEN HEADS KV_HEADS FFN SEQ VOCAB ROPE_THETA NORM_EPS TIED BATCH
      inputs  N id...          targets N id...
      loss LOSS                (this port's)
      param NAME COUNT value...   one line per tensor

    Returns this port's loss, which the C++ side compares with its own."""
    bsz, seq = input_ids.shape
    loss = llama_loss(state, cfg, input_ids, targets)
    with open(path, "w") as f:
        f.write("shape %d %d %d %d %d %d %d %s %s %d %d\n" % (
            cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"],
            cfg["intermediate_size"], seq, cfg["vocab_size"], float(cfg["rope_theta"]).hex(),
            float(cfg["rms_norm_eps"]).hex(), 1 if cfg.get("tie_word_embeddings") else 0, bsz))
        f.write("inputs %d %s\n" % (input_ids.size, " ".join(str(int(t)) for t in input_ids.reshape(-1))))
        f.write("targets %d %s\n" % (targets.size, " ".join(str(int(t)) for t in targets.reshape(-1))))
        f.write("loss %s\n" % loss.hex())
        for name, value in state.items():
            flat = np.asarray(value, dtype=np.float64).reshape(-1)
            f.write("param %s %d %s\n" % (name, flat.size, " ".join(float(x).hex() for x in flat)))
    return loss


def small_config(**over):
    cfg = dict(vocab_size=37, hidden_size=48, intermediate_size=40, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, rms_norm_eps=1e-6, rope_theta=500.0, tie_word_embeddings=False,
               max_position_embeddings=64)
    cfg.update(over)
    return cfg


_STOCK_ATTENTION = None


def hf_float64(model):
    """Patches a transformers LlamaForCausalLM's float32 steps (see the header: the RoPE angles, the
    RMSNorm input, the softmax) to float64, same formulas; returns the model.  The eager attention is
    swapped module-wide: restore_hf_attention() puts transformers' own back."""
    import torch
    from transformers.models.llama import modeling_llama
    global _STOCK_ATTENTION
    if _STOCK_ATTENTION is None:
        _STOCK_ATTENTION = modeling_llama.eager_attention_forward

    def norm_forward(self, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))

    def rope_forward(self, x, position_ids):
        dim = self.inv_freq.shape[-1] * 2
        base = self.config.rope_parameters["rope_theta"]
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(torch.float64) / dim))
        freqs = position_ids[..., None].to(torch.float64) * inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    def eager_attention_forward(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
        key_states = modeling_llama.repeat_kv(key, module.num_key_value_groups)
        value_states = modeling_llama.repeat_kv(value, module.num_key_value_groups)
        attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling
        if attention_mask is not None:
            attn_weights = attn_weights + attention_mask
        attn_weights = torch.nn.functional.softmax(attn_weights, dim=-1)  # not dtype=torch.float32
        attn_output = torch.matmul(attn_weights, value_states).transpose(1, 2).contiguous()
        return attn_output, attn_weights

    # LlamaAttention looks the default up in the module's globals at each call (restored below).
    modeling_llama.eager_attention_forward = eager_attention_forward
    for m in model.modules():
        if isinstance(m, modeling_llama.LlamaRMSNorm):
            m.forward = norm_forward.__get__(m)
        elif isinstance(m, modeling_llama.LlamaRotaryEmbedding):
            m.forward = rope_forward.__get__(m)
    return model


def restore_hf_attention():
    from transformers.models.llama import modeling_llama
    if _STOCK_ATTENTION is not None:
        modeling_llama.eager_attention_forward = _STOCK_ATTENTION


def self_check():
    """The port against transformers' LlamaForCausalLM (eager attention, float64) on random weights,
    for grouped-query (kv 2 of 4), multi-query (kv 1), multi-head (kv 4) attention and a tied head.
    Exit 77 without torch and transformers."""
    import os
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM
        from transformers.models.llama import modeling_llama
    except ImportError as e:
        print(f"llama_numpy_port: {e}; skipped (needs torch and transformers)")
        sys.exit(77)

    tolerance = 1e-10

    def rel(got, ref):
        return float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))

    failed = False
    cases = [("gqa kv 2/4", small_config()),
             ("mqa kv 1/4", small_config(num_key_value_heads=1)),
             ("mha kv 4/4", small_config(num_key_value_heads=4)),
             ("tied head, kv 2/4", small_config(tie_word_embeddings=True))]
    for label, cfg in cases:
        torch.manual_seed(0)
        hf_cfg = LlamaConfig(**cfg, attention_bias=False, mlp_bias=False, hidden_act="silu",
                             attn_implementation="eager", dtype=torch.float64)
        model = LlamaForCausalLM(hf_cfg).to(torch.float64).eval()
        # transformers initialises norms to exactly 1; perturb them so that the norm weights count.
        with torch.no_grad():
            for name, prm in model.named_parameters():
                if "norm" in name:
                    prm.add_(0.1 * torch.randn_like(prm))
        state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
        if cfg["tie_word_embeddings"]:
            assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
            state.pop("lm_head.weight", None)  # the port must read embed_tokens
        rng = np.random.default_rng(1)
        ids = rng.integers(0, cfg["vocab_size"], (3, 16))
        targets = rng.integers(0, cfg["vocab_size"], (3, 16))
        with torch.no_grad():
            stock = model(torch.from_numpy(ids)).logits.numpy()
            try:
                patched = hf_float64(model)(torch.from_numpy(ids)).logits.numpy()
            finally:
                restore_hf_attention()
            # transformers' own loss shifts labels; compare with unshifted cross entropy directly.
            ce = torch.nn.functional.cross_entropy(torch.from_numpy(patched).reshape(-1, cfg["vocab_size"]),
                                                   torch.from_numpy(targets).reshape(-1)).item()
        port = llama_logits(state, cfg, ids)
        err, err_stock = rel(port, patched), rel(port, stock)
        loss = llama_loss(state, cfg, ids, targets)
        loss_err = abs(loss - ce) / abs(ce)
        ok = err <= tolerance and loss_err <= tolerance
        failed |= not ok
        print(f"{label:18s} logits {err:.2e} (float64 transformers; stock: {err_stock:.2e}),"
              f" loss {loss_err:.2e}  {'ok' if ok else 'FAILED'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--write-case":
        # --write-case FILE [KV_HEADS [TIED [SEED]]]: 2 sequences of 8 tokens, 4 heads of 6, 2 layers.
        kv = int(sys.argv[3]) if len(sys.argv) > 3 else 2
        tied = len(sys.argv) > 4 and sys.argv[4] not in ("0", "false")
        c = small_config(vocab_size=29, hidden_size=24, intermediate_size=20, num_attention_heads=4,
                         num_key_value_heads=kv, tie_word_embeddings=tied)
        r = np.random.default_rng(int(sys.argv[5]) if len(sys.argv) > 5 else 7)
        st = random_state(c, r)
        x, y = r.integers(0, c["vocab_size"], (2, 8)), r.integers(0, c["vocab_size"], (2, 8))
        print(repr(write_case(sys.argv[2], c, st, x, y)))
    else:
        self_check()
