#!/usr/bin/env python3
"""The PyTorch peer of `mdtp train --tp-mode none`: nanoGPT's GPT-2 (LayerNorm with bias, GeLU
tanh, tied LM head, causal softmax attention) in float32, trained with AdamW on the same
character-level corpus, on a fixed number of CPU threads.  Prints one line per step and a last
line `torch-tokens/s MEDIAN` (first step skipped as warm-up) that run_host_bench.py reads.

Run with /usr/bin/python3 on Debian (python3-torch).  `--device cuda` runs the same model on a GPU
(the peer of bench_gpt_cuda): times are then taken between device synchronisations, and the last
lines give the model TFLOP/s by bench_gpt_cuda's count (6·N + 12·L·H·T per token, N without the
position embedding).  `--attention explicit` replaces PyTorch's fused scaled_dot_product_attention
(FlashAttention on a GPU) by nanoGPT's written-out T×T softmax, the form mdtp computes.  The BLAS thread count follows --threads:
OpenBLAS (Debian's torch uses it through libblas.so.3) reads OPENBLAS_NUM_THREADS when it is
loaded, so the variable is set before torch is imported; otherwise "one thread" would still let
OpenBLAS use every core.
"""
import argparse
import math
import os
import re
import statistics
import sys
import time


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--embd", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--corpus", default=os.path.join(os.path.dirname(__file__), "..", "data", "corpus.txt"))
    p.add_argument("--vocab", type=int, default=0, help="vocabulary size (default: the corpus' characters)")
    p.add_argument("--dtype", choices=("f32", "bf16"), default="f32",
                   help="bf16: forward and loss under torch.autocast('cpu', dtype=torch.bfloat16), f32 weights "
                        "and optimizer (PyTorch's mixed precision, the peer of mdtp train --dtype bf16)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--attention", choices=("sdpa", "explicit"), default="sdpa",
                   help="sdpa: F.scaled_dot_product_attention (fused); explicit: the T x T scores written out")
    return p.parse_args()


args = parse()
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(args.threads)
# With several threads, torch's OpenMP workers spin after each parallel region while OpenBLAS'
# own pthreads run the GEMMs on the same cores; passive waiting keeps them from starving each
# other (on this 2-core machine, spinning made 2 threads several times slower than 1).
if args.threads > 1:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
try:
    import torch
    import torch.nn as nn
    from torch.nn import functional as F
except ImportError:
    print("torch: not installed for", sys.executable, "- the PyTorch comparison is skipped")
    sys.exit(3)


class CausalSelfAttention(nn.Module):
    def __init__(self, H, n_head, T):
        super().__init__()
        self.c_attn = nn.Linear(H, 3 * H)
        self.c_proj = nn.Linear(H, H)
        self.n_head = n_head
        self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)).view(1, 1, T, T))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if args.attention == "sdpa" and hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch < 2.0: nanoGPT's explicit attention
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
            att = F.softmax(att, dim=-1)
            y = att @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, H, n_head, T):
        super().__init__()
        self.ln_1 = nn.LayerNorm(H)
        self.attn = CausalSelfAttention(H, n_head, T)
        self.ln_2 = nn.LayerNorm(H)
        self.c_fc = nn.Linear(H, 4 * H)
        self.c_proj = nn.Linear(4 * H, H)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, V, L, H, n_head, T):
        super().__init__()
        self.wte = nn.Embedding(V, H)
        self.wpe = nn.Embedding(T, H)
        self.h = nn.ModuleList(Block(H, n_head, T) for _ in range(L))
        self.ln_f = nn.LayerNorm(H)
        self.lm_head = nn.Linear(H, V, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * L))
            elif p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        T = idx.size(1)
        x = self.wte(idx) + self.wpe(torch.arange(T, dtype=torch.long, device=idx.device))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def blas_libraries():
    """The BLAS shared objects this process has mapped (BLAS_INFO=generic names none)."""
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if re.search(r"blas|mkl|blis|flame", line.split()[-1])}
        return " ".join(sorted(os.path.realpath(l) for l in libs)) or "none"
    except OSError:
        return "unknown"


def onednn_status():
    """Whether torch's oneDNN (mkldnn) path is on, and whether it has native bf16 on this CPU."""
    mkldnn = torch.backends.mkldnn
    native = "?"
    try:
        native = str(bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()))
    except (AttributeError, RuntimeError):
        pass
    return f"oneDNN available {mkldnn.is_available()}, enabled {mkldnn.enabled}, native bf16 {native}"


def tokens(corpus, vocab):
    try:
        with open(corpus, encoding="utf-8") as f:
            text = f.read()
        chars = sorted(set(text))
        index = {c: i for i, c in enumerate(chars)}
        ids = torch.tensor([index[c] for c in text], dtype=torch.long)
        return ids, vocab or len(chars)
    except OSError:
        V = vocab or 65
        return torch.randint(0, V, (100000,), generator=torch.Generator().manual_seed(0)), V


def main():
    torch.set_num_threads(args.threads)
    torch.manual_seed(1234)
    ids, V = tokens(args.corpus, args.vocab)
    ids = ids % V
    T, B = args.seq, args.batch
    if ids.numel() < B * (T + 1):  # a corpus shorter than one batch: random tokens (timing runs)
        ids = torch.randint(0, V, (4 * B * (T + 1),), generator=torch.Generator().manual_seed(0))
    built = time.perf_counter()
    model = GPT(V, args.layers, args.embd, args.heads, T).to(args.device)
    built = time.perf_counter() - built
    ids = ids.to(args.device)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()} "
          f"(OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'default')}), vocab {V}, "
          f"{args.layers} layers, embd {args.embd}, {args.heads} heads, seq {T}, batch {B}, "
          f"attention {'sdpa' if args.attention == 'sdpa' and hasattr(F, 'scaled_dot_product_attention') else 'explicit softmax'}"
          f", device {args.device}{' (' + torch.cuda.get_device_name() + ')' if args.device == 'cuda' else ''}")
    config = torch.__config__.show()
    settings = dict(re.findall(r"(BLAS_INFO|LAPACK_INFO|USE_MKLDNN|USE_OPENMP)=([^,\s]+)", config))
    capability = re.search(r"CPU capability usage: (\S+)", config)
    print("torch BLAS:", ", ".join(f"{k}={v}" for k, v in settings.items()),
          f"CPU capability {capability.group(1) if capability else '?'}, loaded {blas_libraries()}")
    if args.dtype == "bf16":
        print("torch bf16: autocast cpu bf16,", onednn_status())
    rates = []
    pos = 0
    for step in range(1, args.steps + 1):
        if pos + B * (T + 1) > ids.numel():
            pos = 0
        chunk = ids[pos:pos + B * (T + 1)].view(B, T + 1)
        pos += B * (T + 1)
        sync()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.dtype == "bf16"):
            loss = model(chunk[:, :-1], chunk[:, 1:])
        loss.backward()
        opt.step()
        sync()
        dt = time.perf_counter() - t0
        rate = B * T / dt
        if step > 1:
            rates.append(rate)
        print(f"step {step:5d}  loss {loss.item():.6f}  {dt * 1e3:8.1f} ms  {rate:10.0f} tok/s", flush=True)
    if rates:
        # The same set-up figure as mdtp train prints. torch allocates gradients and the AdamW
        # moments in the first step (lazily), mdtp when it builds the model and the optimizer.
        median_step = B * T / statistics.median(rates)
        print(f"set-up: model built and initialised in {built * 1e3:.1f} ms "
              f"({100 * built / median_step:.0f} % of the median step after the first, {median_step * 1e3:.1f} ms)")
        print(f"torch-setup-seconds {built:.6f}")
        # Model FLOPs as bench_gpt_cuda counts them: 6 N + 12 L H T per token, N every parameter
        # but the position embedding (the tied wte once).
        n = sum(p.numel() for p in model.parameters()) - model.wpe.weight.numel()
        flops_per_token = 6 * n + 12 * args.layers * args.embd * T
        print(f"torch model: {n} parameters without wpe, {flops_per_token:.4g} FLOPs per token; "
              f"{median_step * 1e3:.2f} ms/step, {statistics.median(rates) * flops_per_token / 1e12:.2f} model TFLOP/s")
        print(f"torch-tokens/s {statistics.median(rates):.1f}")


if __name__ == "__main__":
    main()
