#!/usr/bin/env python3
"""PyTorch peer of megatron-c for bench/bench.sh.

A GPT-2 shaped model written plainly in PyTorch: learned position embeddings, pre-LayerNorm
blocks with one fused qkv projection, causal attention through scaled_dot_product_attention
(the flash kernel on a GPU), a 4h tanh-GeLU MLP, a final LayerNorm and an output layer tied to
the word embeddings; AdamW (betas 0.9/0.95, weight decay 0.1), gradient clipping at 1.0, bf16
autocast over fp32 parameters, no dropout, random tokens (the work does not depend on them).
--mode eager runs it as is, --mode compile through torch.compile.

One training step is --global-batch / --micro-batch microbatches with gradient accumulation, as
megatron-c's. After --warmup steps (torch.compile compiles there), --iters steps are timed.
Prints one JSON line: tokens per second, TFLOP/s by Megatron's formula (the one megatron-c's
--log-throughput uses, so the numbers compare), MFU against --peak-tflops, peak memory. Out of
memory prints {"oom": true} and exits 3, so the caller can try a smaller micro batch.

--print-flops prints Megatron's FLOP count for --global-batch sequences and exits (tests).
On a CPU (--device cpu, small shapes) it runs too, for a smoke test; torch without
scaled_dot_product_attention (before 2.0) then uses the same causal attention written out.
"""
import argparse
import json
import math
import sys
import time


def megatron_flops(layers, hidden, heads, seq, vocab, batch):
    """Megatron's num_floating_point_operations for a GPT (no GQA, no SwiGLU, ffn = 4h):
    forward and backward (3x) of the GEMMs, causal attention counted half."""
    kv = hidden // heads
    q = kv * heads
    ffn = 4 * hidden
    mlp = 3 * 2 * hidden * (ffn * 2 * layers)
    attn = (3 * 2) * (hidden * (q + q + q) + q * seq / 2 * 2 + q * hidden)
    logit = 3 * 2 * hidden * vocab
    return batch * seq * (mlp + attn * layers + logit)


def padded_vocab(vocab, multiple=128):
    return (vocab + multiple - 1) // multiple * multiple


def build(torch, args):
    nn = torch.nn
    F = torch.nn.functional
    sdpa = getattr(F, "scaled_dot_product_attention", None)

    class Block(nn.Module):
        def __init__(self, h, nh):
            super().__init__()
            self.nh = nh
            self.ln1 = nn.LayerNorm(h)
            self.qkv = nn.Linear(h, 3 * h)
            self.proj = nn.Linear(h, h)
            self.ln2 = nn.LayerNorm(h)
            self.fc1 = nn.Linear(h, 4 * h)
            self.fc2 = nn.Linear(4 * h, h)

        def attention(self, x):
            b, s, h = x.shape
            q, k, v = self.qkv(x).split(h, dim=2)
            q, k, v = (t.view(b, s, self.nh, h // self.nh).transpose(1, 2) for t in (q, k, v))
            if sdpa is not None:
                y = sdpa(q, k, v, is_causal=True)
            else:  # torch < 2.0 (CPU smoke tests only): the same attention written out
                att = (q @ k.transpose(-2, -1)) / math.sqrt(h // self.nh)
                mask = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
                att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
                y = att @ v
            return self.proj(y.transpose(1, 2).reshape(b, s, h))

        def forward(self, x):
            x = x + self.attention(self.ln1(x))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(args.vocab, args.hidden)
            self.wpe = nn.Embedding(args.seq, args.hidden)
            self.blocks = nn.ModuleList(Block(args.hidden, args.heads) for _ in range(args.layers))
            self.ln_f = nn.LayerNorm(args.hidden)
            for name, p in self.named_parameters():
                if p.dim() > 1:
                    nn.init.normal_(p, std=0.02)
                elif name.endswith("bias"):
                    nn.init.zeros_(p)

        def forward(self, tokens, targets):
            pos = torch.arange(tokens.shape[1], device=tokens.device)
            x = self.wte(tokens) + self.wpe(pos)
            for blk in self.blocks:
                x = blk(x)
            logits = self.ln_f(x) @ self.wte.weight.t()  # tied output layer
            return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))

    return GPT()


def flash_context(torch, device):
    """Forces the flash kernel of scaled_dot_product_attention on a GPU (torch >= 2.0)."""
    import contextlib
    if device != "cuda":
        return contextlib.nullcontext()
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel  # torch >= 2.3
        return sdpa_kernel(SDPBackend.FLASH_ATTENTION)
    except ImportError:
        return torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False, enable_mem_efficient=False)


def run(args):
    import torch
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"error": "torch %s sees no CUDA device" % torch.__version__}))
        return 2
    if args.mode == "compile" and not hasattr(torch, "compile"):
        print(json.dumps({"error": "torch %s has no torch.compile" % torch.__version__}))
        return 2
    torch.manual_seed(1234)
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    model = build(torch, args).to(device)
    decay = [p for p in model.parameters() if p.dim() > 1]
    no_decay = [p for p in model.parameters() if p.dim() <= 1]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    try:
        opt = torch.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=device == "cuda")
    except TypeError:  # torch without the fused AdamW
        opt = torch.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), eps=1e-8)
    step_model = torch.compile(model) if args.mode == "compile" else model
    micro = args.global_batch // args.micro_batch

    def step():
        for _ in range(micro):
            tokens = torch.randint(0, args.vocab, (args.micro_batch, args.seq + 1), device=device)
            with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=args.dtype == "bf16"):
                loss = step_model(tokens[:, :-1], tokens[:, 1:])
            (loss / micro).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    with flash_context(torch, device):
        for _ in range(args.warmup):
            loss = step()
        sync()
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        for _ in range(args.iters):
            loss = step()
        sync()
        elapsed = (time.perf_counter() - t0) / args.iters
    flops = megatron_flops(args.layers, args.hidden, args.heads, args.seq, args.vocab, args.global_batch)
    tflops = flops / elapsed / 1e12
    out = {
        "mode": args.mode,
        "torch": torch.__version__,
        "micro_batch": args.micro_batch,
        "global_batch": args.global_batch,
        "ms_per_iter": elapsed * 1000.0,
        "tokens_per_s": args.global_batch * args.seq / elapsed,
        "tflops": tflops,
        "mfu": tflops / args.peak_tflops,
        "loss": float(loss),
    }
    if device == "cuda":
        out["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
        out["peak_reserved_gib"] = torch.cuda.max_memory_reserved() / 2**30
    print(json.dumps(out))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=padded_vocab(50257),
                   help="the padded vocabulary (megatron-c pads 50257 to 50304)")
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--global-batch", type=int, default=32)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--mode", choices=["eager", "compile"], default="eager")
    p.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--peak-tflops", type=float, default=989.0, help="for MFU: H100 SXM dense bf16")
    p.add_argument("--print-flops", action="store_true")
    args = p.parse_args()
    if args.print_flops:
        print("%.0f" % megatron_flops(args.layers, args.hidden, args.heads, args.seq, args.vocab, args.global_batch))
        return 0
    if args.global_batch % args.micro_batch:
        p.error("--global-batch must be a multiple of --micro-batch")
    try:
        return run(args)
    except RuntimeError as e:  # torch.cuda.OutOfMemoryError is a RuntimeError
        if "out of memory" in str(e).lower():
            print(json.dumps({"oom": True, "micro_batch": args.micro_batch}))
            return 3
        raise


if __name__ == "__main__":
    sys.exit(main())
