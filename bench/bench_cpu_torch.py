#!/usr/bin/python3
"""PyTorch half of bench/bench-cpu.sh: times full fp32 training steps of the GPT that megatron-c
trains (Megatron MCore "local" spec) on the CPU, one thread.

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 /usr/bin/python3 bench/bench_cpu_torch.py \
        --num-layers 4 --hidden-size 256 --num-attention-heads 8 --seq-length 256 \
        --micro-batch-size 4 --global-batch-size 4 --vocab-size 8192

Model, written plainly with torch ops so that both sides run the same algorithm (no
torch.compile, no fused scaled-dot-product attention; the s x s scores are materialised as in
Megatron's unfused DotProductAttention):
  word + learned position embeddings -> L x [LN -> QKV (per-head [q k v] layout) -> baddbmm
  scores * 1/sqrt(hd) -> causal mask -10000 -> softmax -> bmm -> proj -> residual; LN -> fc1
  (4h) -> tanh GeLU -> fc2 -> residual] -> final LN -> logits with the word embeddings (tied) ->
  cross-entropy over the padded vocab. Linear layers have biases; dropout is 0.
Optimizer: AdamW (lr 1e-4, betas 0.9/0.999, eps 1e-8, weight decay 0.01 on weights, 0 on biases
and LayerNorm parameters as in Megatron), global grad-norm clipping 1.0.
A step is zero_grad, forward+backward over the microbatches (loss / num_microbatches, Megatron's
normalisation), clip, optimizer step. Warm-up steps are not timed; prints the median (and mean)
ms/step over the timed steps, and a line `ms_per_step: X` (the median) for scripts.
Numbers default from the BENCH_* environment variables that bench-cpu.sh uses.
"""
import argparse
import math
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def env_int(name, default):
    return int(os.environ.get(name, default))


def padded_vocab(v, divisible_by):
    return ((v + divisible_by - 1) // divisible_by) * divisible_by


GELU_K = math.sqrt(2.0 / math.pi)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(GELU_K * x * (1.0 + 0.044715 * x * x)))


class Layer(nn.Module):
    def __init__(self, h, nh, ffn, std, out_std, eps):
        super().__init__()
        self.nh, self.hd, self.eps = nh, h // nh, eps
        self.ln1_w, self.ln1_b = nn.Parameter(torch.ones(h)), nn.Parameter(torch.zeros(h))
        self.qkv = nn.Linear(h, 3 * h)
        self.proj = nn.Linear(h, h)
        self.ln2_w, self.ln2_b = nn.Parameter(torch.ones(h)), nn.Parameter(torch.zeros(h))
        self.fc1 = nn.Linear(h, ffn)
        self.fc2 = nn.Linear(ffn, h)
        for lin, s in ((self.qkv, std), (self.proj, out_std), (self.fc1, std), (self.fc2, out_std)):
            nn.init.normal_(lin.weight, 0.0, s)
            nn.init.zeros_(lin.bias)

    def attention(self, x, mask):
        s, b, h = x.shape
        nh, hd = self.nh, self.hd
        qkv = self.qkv(x).view(s, b, nh, 3 * hd)        # per head: [q_i | k_i | v_i]
        q, k, v = torch.split(qkv, hd, dim=-1)           # each [s, b, nh, hd]
        q = q.reshape(s, b * nh, hd).transpose(0, 1)     # [b*nh, s, hd]
        k = k.reshape(s, b * nh, hd).transpose(0, 1)
        v = v.reshape(s, b * nh, hd).transpose(0, 1)
        scores = torch.empty(b * nh, s, s, dtype=x.dtype)
        scores = torch.baddbmm(scores, q, k.transpose(1, 2), beta=0.0, alpha=1.0 / math.sqrt(hd))
        scores = scores.masked_fill(mask, -10000.0)
        probs = torch.softmax(scores, dim=-1)
        ctx = torch.bmm(probs, v)                        # [b*nh, s, hd]
        ctx = ctx.transpose(0, 1).reshape(s, b, h)       # column = head*hd + d
        return self.proj(ctx)

    def forward(self, x, mask):
        h = x.shape[-1]
        x = x + self.attention(F.layer_norm(x, (h,), self.ln1_w, self.ln1_b, self.eps), mask)
        y = F.layer_norm(x, (h,), self.ln2_w, self.ln2_b, self.eps)
        return x + self.fc2(gelu_tanh(self.fc1(y)))


class GPT(nn.Module):
    def __init__(self, L, h, nh, ffn, vpad, max_pos, eps=1e-5, std=0.02):
        super().__init__()
        self.eps = eps
        self.word = nn.Embedding(vpad, h)
        self.pos = nn.Embedding(max_pos, h)
        nn.init.normal_(self.word.weight, 0.0, std)
        nn.init.normal_(self.pos.weight, 0.0, std)
        out_std = std / math.sqrt(2.0 * L)
        self.layers = nn.ModuleList([Layer(h, nh, ffn, std, out_std, eps) for _ in range(L)])
        self.lnf_w, self.lnf_b = nn.Parameter(torch.ones(h)), nn.Parameter(torch.zeros(h))

    def forward(self, tokens, labels):
        """tokens, labels: int64 [b, s] -> mean token loss (scalar)."""
        b, s = tokens.shape
        h = self.word.weight.shape[1]
        x = self.word(tokens) + self.pos(torch.arange(s))[None, :, :]   # [b, s, h]
        x = x.transpose(0, 1).contiguous()                                # [s, b, h]
        mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)  # True = masked
        for layer in self.layers:
            x = layer(x, mask)
        x = F.layer_norm(x, (h,), self.lnf_w, self.lnf_b, self.eps)
        logits = F.linear(x, self.word.weight)                            # [s, b, V_pad], tied
        return F.cross_entropy(logits.view(s * b, -1), labels.t().reshape(s * b))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--num-layers", type=int, default=env_int("BENCH_LAYERS", 4))
    ap.add_argument("--hidden-size", type=int, default=env_int("BENCH_HIDDEN", 256))
    ap.add_argument("--num-attention-heads", type=int, default=env_int("BENCH_HEADS", 8))
    ap.add_argument("--seq-length", type=int, default=env_int("BENCH_SEQ", 256))
    ap.add_argument("--micro-batch-size", type=int, default=env_int("BENCH_MBS", 4))
    ap.add_argument("--global-batch-size", type=int, default=env_int("BENCH_GBS", 4))
    ap.add_argument("--vocab-size", type=int, default=env_int("BENCH_VOCAB", 8192))
    ap.add_argument("--make-vocab-size-divisible-by", type=int, default=128)
    ap.add_argument("--warmup-steps", type=int, default=env_int("BENCH_TORCH_WARMUP", 3))
    ap.add_argument("--steps", type=int, default=env_int("BENCH_TORCH_STEPS", 10))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    torch.manual_seed(a.seed)
    assert a.hidden_size % a.num_attention_heads == 0
    assert a.global_batch_size % a.micro_batch_size == 0
    nmb = a.global_batch_size // a.micro_batch_size
    vpad = padded_vocab(a.vocab_size, a.make_vocab_size_divisible_by)
    L, h, s = a.num_layers, a.hidden_size, a.seq_length

    model = GPT(L, h, a.num_attention_heads, 4 * h, vpad, s)
    decay = [p for n, p in model.named_parameters() if p.dim() > 1]
    no_decay = [p for n, p in model.named_parameters() if p.dim() <= 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.999), eps=1e-8)
    nparams = sum(p.numel() for p in model.parameters())

    # Mock data: random token ids in [0, vocab_size), labels = tokens shifted by one.
    def batch():
        t = torch.randint(0, a.vocab_size, (a.micro_batch_size, s + 1), dtype=torch.int64)
        return t[:, :-1].contiguous(), t[:, 1:].contiguous()

    nbatches = 4
    data = [[batch() for _ in range(nmb)] for _ in range(nbatches)]

    def step(i):
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for tok, lab in data[i % nbatches]:
            loss = model(tok, lab) / nmb
            loss.backward()
            total += loss.item()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return total, float(gnorm)

    print("torch %s, threads %d, BLAS via %s" %
          (torch.__version__, torch.get_num_threads(),
           "libblas.so.3 (generic)" if "BLAS_INFO=generic" in torch.__config__.show()
           else "built-in"))
    print("config: layers %d hidden %d heads %d seq %d mbs %d gbs %d vocab %d (padded %d), "
          "%d params" % (L, h, a.num_attention_heads, s, a.micro_batch_size,
                         a.global_batch_size, a.vocab_size, vpad, nparams))
    times = []
    for i in range(a.warmup_steps + a.steps):
        t0 = time.perf_counter()
        loss, gnorm = step(i)
        dt = (time.perf_counter() - t0) * 1000.0
        if i >= a.warmup_steps:
            times.append(dt)
        print("step %3d%s loss %.4f grad-norm %.4f  %.1f ms" %
              (i + 1, " (warm-up)" if i < a.warmup_steps else "", loss, gnorm, dt))
    med = statistics.median(times)
    mean = statistics.fmean(times)
    tok = a.global_batch_size * s
    print("median %.1f ms/step, mean %.1f ms/step over %d steps (min %.1f, max %.1f); "
          "%.0f tokens/s" % (med, mean, len(times), min(times), max(times), tok / med * 1000.0))
    print("ms_per_step: %.3f" % med)


if __name__ == "__main__":
    main()
