#!/usr/bin/python3
"""PyTorch float64 reference of Megatron-LM's GPT (MCore "local" spec) and its AdamW/LR schedule.

Writes the MCFX test fixtures that the C model, optimizer and schedule are checked against.

    /usr/bin/python3 test/ref/gpt_ref.py test/fixtures      # generate (what `make fixtures` runs)
    /usr/bin/python3 test/ref/gpt_ref.py test/fixtures llama_gqa.mcfx   # only the named ones
    /usr/bin/python3 test/ref/gpt_ref.py --self-check       # gradient/optimizer self-check only

Spec: /work/shared/spec/MEGATRON.md sections 5.3 (loss normalisation), 6 (model math),
7 (optimizer, LR schedule). Everything here is deliberately explicit; autograd supplies the
backward pass, finite differences check it (--self-check, also run before generating).

MCFX file format (little-endian):
    b"MCFX0001", u32 record count, then per record:
    u32 name_len, name bytes (no NUL), u32 dtype (0=f32, 1=i32, 2=f64, 3=i64), u32 ndim (0..8),
    i64 dims[ndim], raw data (numel*itemsize bytes; ndim 0 holds one element).
"""
import math
import os
import struct
import sys

# OpenBLAS picks its float64 GEMM kernel by CPU, and the kernels round differently: pin the
# AVX2 one the committed fixtures were made with, so regenerating them on an AVX-512 machine
# leaves them byte-identical (set before numpy/torch load OpenBLAS; an explicit value wins).
if os.uname().machine == "x86_64":
    os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_ref  # noqa: E402  (the Llama block's ops)

torch.set_default_dtype(torch.float64)

# --------------------------------------------------------------------------------------------
# MCFX writer
# --------------------------------------------------------------------------------------------
MAGIC = b"MCFX0001"
DTYPES = {np.dtype(np.float32): 0, np.dtype(np.int32): 1, np.dtype(np.float64): 2,
          np.dtype(np.int64): 3}


class Fixture:
    def __init__(self):
        self.records = []  # (name, ndarray)
        self.names = set()

    def add(self, name, value, dtype):
        """value: tensor / ndarray / python number; dtype: a numpy dtype the record is stored in."""
        if torch.is_tensor(value):
            value = value.detach().cpu().numpy()
        arr = np.array(value, dtype=dtype, order="C", copy=True)  # keeps ndim 0
        assert name not in self.names, name
        assert arr.ndim <= 8
        self.names.add(name)
        self.records.append((name, arr))

    def add_config(self, key, value):
        if isinstance(value, bool) or isinstance(value, int):
            self.add("config." + key, int(value), np.int64)
        else:
            self.add("config." + key, float(value), np.float64)

    def write(self, path):
        out = bytearray(MAGIC)
        out += struct.pack("<I", len(self.records))
        for name, arr in self.records:
            nb = name.encode()
            out += struct.pack("<I", len(nb)) + nb
            out += struct.pack("<II", DTYPES[arr.dtype], arr.ndim)
            out += struct.pack("<%dq" % arr.ndim, *arr.shape)
            out += arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        with open(path, "wb") as f:
            f.write(out)
        return len(out)


def read_mcfx(path):
    """Python reader (used by the self-check to round-trip the writer)."""
    inv = {v: k for k, v in DTYPES.items()}
    with open(path, "rb") as f:
        buf = f.read()
    assert buf[:8] == MAGIC
    (n,), off = struct.unpack_from("<I", buf, 8), 12
    recs = {}
    for _ in range(n):
        (ln,) = struct.unpack_from("<I", buf, off)
        off += 4
        name = buf[off:off + ln].decode()
        off += ln
        dt, nd = struct.unpack_from("<II", buf, off)
        off += 8
        dims = struct.unpack_from("<%dq" % nd, buf, off)
        off += 8 * nd
        dtype = inv[dt]
        cnt = int(np.prod(dims)) if nd else 1
        recs[name] = np.frombuffer(buf, dtype=dtype.newbyteorder("<"), count=cnt,
                                   offset=off).reshape(dims)
        off += cnt * dtype.itemsize
    assert off == len(buf)
    return recs


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------
def padded_vocab(v, divisible_by=128, tp=1):
    m = divisible_by * tp
    return ((v + m - 1) // m) * m


# The Llama-family options (fixture records config.<key>), with the values that make the GPT
# model. Enumerations as integers: position_embedding_type 0 learned_absolute, 1 rope, 2 none;
# normalization 0 LayerNorm, 1 RMSNorm; rotary_seq_len_interpolation_factor 0 = none.
LLAMA_KEYS = dict(position_embedding_type=0, normalization=0, swiglu=False, squared_relu=False,
                  group_query_attention=False, num_query_groups=None, rotary_base=10000,
                  rotary_percent=1.0, rotary_interleaved=False,
                  rotary_seq_len_interpolation_factor=0, use_rope_scaling=False,
                  rope_scaling_factor=8.0, add_qkv_bias=None, qk_layernorm=False)


def make_cfg(num_layers, hidden, heads, ffn, seq, mbs, nmb, vocab, max_pos, tied, bias,
             eps=1e-5, seed=1234, post_ln=False, llama=None):
    """llama: None for the GPT fixtures (whose records stay as they were), else a dict of
    LLAMA_KEYS overrides plus optionally kv_channels; every LLAMA_KEYS entry is then recorded."""
    cfg = dict(num_layers=num_layers, hidden_size=hidden, num_attention_heads=heads,
               ffn_hidden_size=ffn, kv_channels=hidden // heads, seq_length=seq,
               max_position_embeddings=max_pos, micro_batch_size=mbs, num_microbatches=nmb,
               global_batch_size=mbs * nmb, vocab_size=vocab,
               make_vocab_size_divisible_by=128, padded_vocab_size=padded_vocab(vocab),
               add_bias_linear=bool(bias), bias_gelu_fusion=bool(bias),
               untie_embeddings_and_output_weights=not tied, norm_epsilon=eps,
               apply_residual_connection_post_layernorm=bool(post_ln),
               init_method_std=0.02, hidden_dropout=0.0, attention_dropout=0.0, seed=seed)
    if llama is None:
        return cfg
    llama = dict(llama)
    cfg["kv_channels"] = llama.pop("kv_channels", cfg["kv_channels"])
    assert set(llama) <= set(LLAMA_KEYS), set(llama) - set(LLAMA_KEYS)
    cfg.update(LLAMA_KEYS, **llama)
    if not cfg["group_query_attention"]:
        cfg["num_query_groups"] = heads  # Megatron: num_query_groups None = one per head
    if cfg["add_qkv_bias"] is None or cfg["add_bias_linear"]:
        cfg["add_qkv_bias"] = cfg["add_bias_linear"]  # --add-bias-linear implies qkv bias
    if cfg["swiglu"] or cfg["squared_relu"]:
        cfg["bias_gelu_fusion"] = False
    assert not (cfg["swiglu"] and cfg["squared_relu"])
    assert heads % cfg["num_query_groups"] == 0
    return cfg


def cfg_opt(cfg, key):
    """A Llama option with its GPT value when the cfg predates them (GPT fixtures, callers such
    as megatron_ckpt.py)."""
    if key in cfg:
        return cfg[key]
    if key == "num_query_groups":
        return cfg["num_attention_heads"]
    if key == "add_qkv_bias":
        return cfg["add_bias_linear"]
    return LLAMA_KEYS[key]


def norm_shapes(prefix, n, cfg):
    """A normalization layer's parameters: RMSNorm has no bias."""
    out = [(prefix + ".weight", (n,))]
    return out if cfg_opt(cfg, "normalization") == 1 else out + [(prefix + ".bias", (n,))]


def param_shapes(cfg):
    """(name, shape) in model.parameters() order, global layer numbers."""
    h, f, V = cfg["hidden_size"], cfg["ffn_hidden_size"], cfg["padded_vocab_size"]
    np_, ng, hn = cfg["num_attention_heads"], cfg_opt(cfg, "num_query_groups"), cfg["kv_channels"]
    bias = cfg["add_bias_linear"]
    out = [("embedding.word_embeddings.weight", (V, h))]
    if cfg_opt(cfg, "position_embedding_type") == 0:
        out.append(("embedding.position_embeddings.weight", (cfg["max_position_embeddings"], h)))
    qkv_rows = ng * (np_ // ng + 2) * hn
    fc1_rows = 2 * f if cfg_opt(cfg, "swiglu") else f
    for i in range(cfg["num_layers"]):
        p = "decoder.layers.%d." % i
        out += norm_shapes(p + "input_layernorm", h, cfg)
        out.append((p + "self_attention.linear_qkv.weight", (qkv_rows, h)))
        if cfg_opt(cfg, "add_qkv_bias"):
            out.append((p + "self_attention.linear_qkv.bias", (qkv_rows,)))
        if cfg_opt(cfg, "qk_layernorm"):
            out += norm_shapes(p + "self_attention.q_layernorm", hn, cfg)
            out += norm_shapes(p + "self_attention.k_layernorm", hn, cfg)
        out.append((p + "self_attention.linear_proj.weight", (h, np_ * hn)))
        if bias:
            out.append((p + "self_attention.linear_proj.bias", (h,)))
        out += norm_shapes(p + "pre_mlp_layernorm", h, cfg)
        out.append((p + "mlp.linear_fc1.weight", (fc1_rows, h)))
        if bias:
            out.append((p + "mlp.linear_fc1.bias", (fc1_rows,)))
        out.append((p + "mlp.linear_fc2.weight", (h, f)))
        if bias:
            out.append((p + "mlp.linear_fc2.bias", (h,)))
    out += norm_shapes("decoder.final_layernorm", h, cfg)
    if cfg["untie_embeddings_and_output_weights"]:
        out.append(("output_layer.weight", (V, h)))
    return out


def init_params(cfg):
    """float32 values (realistic, biases and LN params deliberately non-trivial)."""
    torch.manual_seed(cfg["seed"])
    std = cfg["init_method_std"]
    scaled = std / math.sqrt(2.0 * cfg["num_layers"])
    params = {}
    for name, shape in param_shapes(cfg):
        if name.endswith("layernorm.weight"):
            t = 1.0 + 0.1 * torch.randn(shape, dtype=torch.float32)
        elif name.endswith("layernorm.bias"):
            t = 0.1 * torch.randn(shape, dtype=torch.float32)
        elif name.endswith(".bias"):
            t = 0.02 * torch.randn(shape, dtype=torch.float32)
        elif name.endswith("linear_proj.weight") or name.endswith("linear_fc2.weight"):
            t = scaled * torch.randn(shape, dtype=torch.float32)
        else:
            t = std * torch.randn(shape, dtype=torch.float32)
        params[name] = t.contiguous()
    return params


# --------------------------------------------------------------------------------------------
# Model (float64, functional)
# --------------------------------------------------------------------------------------------
GELU_K = 0.7978845608028654


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(GELU_K * x * (1.0 + 0.044715 * x * x)))


def gelu_erf(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def layer_norm(x, w, b, eps):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased variance
    return (x - mean) / torch.sqrt(var + eps) * w + b


def linear(x, w, b=None):
    y = x @ w.t()
    return y if b is None else y + b


def norm(x, P, prefix, cfg):
    """The model's normalization layer `prefix` (LayerNorm, or RMSNorm without bias)."""
    if cfg_opt(cfg, "normalization") == 1:
        return llama_ref.rms_norm(x, P[prefix + ".weight"], cfg["norm_epsilon"])
    return layer_norm(x, P[prefix + ".weight"], P[prefix + ".bias"], cfg["norm_epsilon"])


def split_qkv(qkv, cfg):
    """linear_qkv output [s, b, ng*(np/ng+2)*hn] -> q [s,b,np,hn], k and v [s,b,ng,hn]: per query
    group its np/ng query heads, then its key head, then its value head."""
    s, b = qkv.shape[:2]
    np_, ng, hn = cfg["num_attention_heads"], cfg_opt(cfg, "num_query_groups"), cfg["kv_channels"]
    qpg = np_ // ng
    qkv = qkv.view(s, b, ng, (qpg + 2) * hn)
    q = qkv[..., :qpg * hn].reshape(s, b, np_, hn)
    return q, qkv[..., qpg * hn:(qpg + 1) * hn], qkv[..., (qpg + 1) * hn:]


def attention(x, P, pre, cfg, rope=None):
    """x: [s, b, h] -> linear_proj output (with its bias) [s, b, h]; rope: (cos, sin) or None."""
    s, b, h = x.shape
    np_, ng, hn = cfg["num_attention_heads"], cfg_opt(cfg, "num_query_groups"), cfg["kv_channels"]
    qkv = linear(x, P[pre + "linear_qkv.weight"], P.get(pre + "linear_qkv.bias"))
    q, k, v = split_qkv(qkv, cfg)
    if cfg_opt(cfg, "qk_layernorm"):  # over each head's hn channels, before RoPE
        q, k = norm(q, P, pre + "q_layernorm", cfg), norm(k, P, pre + "k_layernorm", cfg)
    if rope is not None:
        q = llama_ref.apply_rope(q, *rope, cfg_opt(cfg, "rotary_interleaved"))
        k = llama_ref.apply_rope(k, *rope, cfg_opt(cfg, "rotary_interleaved"))
    if ng != np_:  # query head i uses the key/value head of group i // (np/ng)
        k, v = k.repeat_interleave(np_ // ng, dim=2), v.repeat_interleave(np_ // ng, dim=2)
    q, k, v = (t.permute(1, 2, 0, 3) for t in (q, k, v))  # [b, np, s, hn]
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(hn)   # [b, np, s(q), s(k)]
    causal = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)  # True = masked (k > q)
    scores = scores.masked_fill(causal, -10000.0)
    probs = torch.softmax(scores, dim=-1)
    ctx = probs @ v                                   # [b, np, s, hn]
    ctx = ctx.permute(2, 0, 1, 3).reshape(s, b, np_ * hn)  # column = head*hn + d
    return linear(ctx, P[pre + "linear_proj.weight"], P.get(pre + "linear_proj.bias"))


def mlp(x, P, pre, cfg):
    y = linear(x, P[pre + "linear_fc1.weight"], P.get(pre + "linear_fc1.bias"))
    if cfg_opt(cfg, "swiglu"):
        y = llama_ref.swiglu(y)
    elif cfg_opt(cfg, "squared_relu"):
        y = llama_ref.squared_relu(y)
    else:
        y = gelu_tanh(y) if cfg["add_bias_linear"] else gelu_erf(y)
    return linear(y, P[pre + "linear_fc2.weight"], P.get(pre + "linear_fc2.bias"))


def gpt_forward(P, cfg, tokens):
    """P: name -> float64 tensor; tokens: int64 [b, s]. Returns logits [s, b, V_pad]."""
    b, s = tokens.shape
    x = P["embedding.word_embeddings.weight"][tokens]
    if cfg_opt(cfg, "position_embedding_type") == 0:
        x = x + P["embedding.position_embeddings.weight"][torch.arange(s)][None, :, :]
    x = x.transpose(0, 1)  # [s, b, h]; embedding dropout p=0
    rope = llama_ref.rope_cos_sin(cfg, s) if cfg_opt(cfg, "position_embedding_type") == 1 else None
    for i in range(cfg["num_layers"]):
        pre = "decoder.layers.%d." % i
        # --apply-residual-connection-post-layernorm: the residual is the LayerNorm output
        post_ln = cfg.get("apply_residual_connection_post_layernorm", False)
        y = norm(x, P, pre + "input_layernorm", cfg)
        x = (y if post_ln else x) + attention(y, P, pre + "self_attention.", cfg, rope)
        y = norm(x, P, pre + "pre_mlp_layernorm", cfg)
        x = (y if post_ln else x) + mlp(y, P, pre + "mlp.", cfg)
    x = norm(x, P, "decoder.final_layernorm", cfg)
    w_out = P["output_layer.weight"] if cfg["untie_embeddings_and_output_weights"] \
        else P["embedding.word_embeddings.weight"]
    return x @ w_out.t()  # [s, b, V_pad]


def token_losses(logits, labels):
    """logits [s,b,V], labels [b,s] -> per-token loss [b,s] = logsumexp - logit[label]."""
    lse = torch.logsumexp(logits, dim=-1)                                  # [s, b]
    picked = logits.gather(-1, labels.t().unsqueeze(-1)).squeeze(-1)      # [s, b]
    return (lse - picked).t()


def forward_backward(P, cfg, batches, want_logits=False, per_token=False):
    """batches: list of (tokens [b,s] i64, labels [b,s] i64, mask [b,s] f64), one per microbatch.
    Returns dict: objective (backward objective, a graph tensor), reported loss, per-mb losses,
    the token sums, and logits of microbatch 0."""
    M = len(batches)
    objective = 0.0
    tot_sum, tot_tok, mb_loss, logits0 = 0.0, 0.0, [], None
    for m, (tok, lab, mask) in enumerate(batches):
        logits = gpt_forward(P, cfg, tok)
        if m == 0 and want_logits:
            logits0 = logits.detach().clone()
        loss = token_losses(logits, lab)
        lsum = (loss * mask).sum()
        ntok = mask.sum()
        mb = lsum / torch.clamp(ntok, min=1.0)
        objective = objective + mb / M
        mb_loss.append(mb.item())
        tot_sum += lsum.item()
        tot_tok += ntok.item()
    if per_token:
        # --calculate-per-token-loss: no per-microbatch division; grads scaled by 1/total tokens
        objective = sum((token_losses(gpt_forward(P, cfg, tok), lab) * mask).sum()
                        for tok, lab, mask in batches) / max(tot_tok, 1.0)
    return dict(objective=objective, loss=tot_sum / max(tot_tok, 1.0), mb_loss=mb_loss,
                num_tokens=tot_tok, logits0=logits0)


def as_f64_leaves(params32):
    return {k: v.to(torch.float64).clone().requires_grad_(True) for k, v in params32.items()}


def compute_grads(P, cfg, batches, want_logits=False, per_token=False):
    for p in P.values():
        p.grad = None
    r = forward_backward(P, cfg, batches, want_logits, per_token)
    r["objective"].backward()
    r["grads"] = {k: p.grad.detach().clone() for k, p in P.items()}
    return r


# --------------------------------------------------------------------------------------------
# Optimizer and LR schedule (hand-written, float64)
# --------------------------------------------------------------------------------------------
DECAY_STYLES = {"constant": 0, "linear": 1, "cosine": 2, "inverse-square-root": 3}


def lr_at(n, t):
    """Megatron OptimizerParamScheduler.get_lr at n samples; t: training config dict."""
    gbs = t["global_batch_size"]
    warmup = t["lr_warmup_iters"] * gbs
    decay = t["lr_decay_iters"] * gbs
    mx, mn, init, style = t["lr"], t["min_lr"], t["lr_warmup_init"], t["lr_decay_style"]
    assert warmup < decay and mn <= mx
    if warmup > 0 and n <= warmup:
        return init + (mx - init) * n / warmup
    if style == "constant":
        return mx
    if n > decay:
        return mn
    if style == "inverse-square-root":
        return max(mn, mx * math.sqrt(max(warmup, 1)) / math.sqrt(max(n, 1)))
    r = (n - warmup) / (decay - warmup)
    coeff = 1.0 - r if style == "linear" else 0.5 * (math.cos(math.pi * r) + 1.0)
    return mn + coeff * (mx - mn)


def wd_mult(name, shape):
    return 0.0 if len(shape) == 1 or name.endswith(".bias") else 1.0


def clip_grads(grads, clip):
    """Returns (pre-clip total norm, coeff applied or 1.0); scales grads in place."""
    total = math.sqrt(sum(float((g * g).sum()) for g in grads.values()))
    coeff = clip / (total + 1e-6)
    if coeff < 1.0:
        for g in grads.values():
            g.mul_(coeff)
    return total, min(coeff, 1.0)


class Adam:
    def __init__(self, params, t):
        self.b1, self.b2, self.eps, self.wd = t["adam_beta1"], t["adam_beta2"], t["adam_eps"], \
            t["weight_decay"]
        self.m = {k: torch.zeros_like(v) for k, v in params.items()}
        self.v = {k: torch.zeros_like(v) for k, v in params.items()}
        self.step_count = 0

    def step(self, params, grads, lr):
        self.step_count += 1
        t = self.step_count
        b1, b2 = self.b1, self.b2
        with torch.no_grad():
            for k, p in params.items():
                g = grads[k]
                m = self.m[k] = b1 * self.m[k] + (1.0 - b1) * g
                v = self.v[k] = b2 * self.v[k] + (1.0 - b2) * g * g
                mh = m / (1.0 - b1 ** t)
                vh = v / (1.0 - b2 ** t)
                wd = self.wd * wd_mult(k, tuple(p.shape))
                p.copy_(p - lr * (mh / (torch.sqrt(vh) + self.eps) + wd * p))


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------
def random_batches(rng, cfg, n_mb):
    """Uniform random ids/labels, mostly-ones loss mask with a few zeros."""
    b, s, V = cfg["micro_batch_size"], cfg["seq_length"], cfg["vocab_size"]
    out = []
    for _ in range(n_mb):
        tok = rng.integers(0, V, size=(b, s))
        lab = rng.integers(0, V, size=(b, s))
        mask = (rng.random((b, s)) >= 0.15).astype(np.float64)
        out.append((tok, lab, mask))
    return out


def make_stream(rng, vocab, n):
    """A random token stream with learnable structure: a sparse random bigram chain over a
    Zipf-like unigram distribution, so a few optimizer steps visibly lower the loss."""
    ranks = np.arange(1, vocab + 1, dtype=np.float64)
    uni = (1.0 / ranks) / (1.0 / ranks).sum()
    succ = rng.integers(0, vocab, size=(vocab, 3))  # each token has three likely successors
    x = np.empty(n, dtype=np.int64)
    x[0] = rng.choice(vocab, p=uni)
    for i in range(1, n):
        if rng.random() < 0.7:
            x[i] = succ[x[i - 1], rng.integers(0, 3)]
        else:
            x[i] = rng.choice(vocab, p=uni)
    return x


def lm_batches(rng, stream, cfg, n_mb):
    """LM microbatches: windows of s+1 tokens of the stream; labels = tokens shifted by one."""
    b, s = cfg["micro_batch_size"], cfg["seq_length"]
    out = []
    for _ in range(n_mb):
        starts = rng.integers(0, len(stream) - s - 1, size=b)
        win = np.stack([stream[st:st + s + 1] for st in starts])
        mask = (rng.random((b, s)) >= 0.1).astype(np.float64)
        out.append((win[:, :-1], win[:, 1:], mask))
    return out


def to_torch(batches):
    return [(torch.from_numpy(np.asarray(t, dtype=np.int64)),
             torch.from_numpy(np.asarray(l, dtype=np.int64)),
             torch.from_numpy(np.asarray(m, dtype=np.float64))) for t, l, m in batches]


def add_batches(fx, prefix, batches):
    for m, (tok, lab, mask) in enumerate(batches):
        fx.add("%sbatch.%d.tokens" % (prefix, m), tok, np.int32)
        fx.add("%sbatch.%d.labels" % (prefix, m), lab, np.int32)
        fx.add("%sbatch.%d.loss_mask" % (prefix, m), mask, np.float32)


def add_model_config(fx, cfg):
    for k, v in cfg.items():
        fx.add_config(k, v)


# --------------------------------------------------------------------------------------------
# Fixture builders
# --------------------------------------------------------------------------------------------
CFG_TIED_BIAS = dict(num_layers=2, hidden=32, heads=4, ffn=128, seq=16, mbs=2, nmb=2, vocab=100,
                     max_pos=16, tied=True, bias=True, seed=1234)
CFG_UNTIED_NOBIAS = dict(num_layers=3, hidden=48, heads=6, ffn=96, seq=12, mbs=3, nmb=2,
                         vocab=200, max_pos=20, tied=False, bias=False, seed=4321)

# Post-LN residual, with gradients of the --calculate-per-token-loss objective as well.
CFG_POSTLN = dict(num_layers=2, hidden=24, heads=3, ffn=64, seq=10, mbs=2, nmb=3, vocab=90,
                  max_pos=12, tied=True, bias=True, seed=99, post_ln=True, per_token_grads=True)

TRAIN_TIED_BIAS = dict(lr=5e-3, min_lr=5e-4, lr_warmup_iters=2, lr_decay_iters=10,
                       train_iters=10, lr_decay_style="cosine", weight_decay=0.1, clip_grad=1.0,
                       adam_beta1=0.9, adam_beta2=0.95, adam_eps=1e-8, lr_warmup_init=0.0)
TRAIN_UNTIED_NOBIAS = dict(lr=2e-3, min_lr=1e-4, lr_warmup_iters=0, lr_decay_iters=10,
                           train_iters=10, lr_decay_style="linear", weight_decay=0.05,
                           clip_grad=0.5, adam_beta1=0.9, adam_beta2=0.999, adam_eps=1e-8,
                           lr_warmup_init=0.0)

# The Llama block (RoPE, RMSNorm, SwiGLU / squared ReLU, grouped-query attention), untied or tied.
ROPE_RMS = dict(position_embedding_type=1, normalization=1)
CFG_LLAMA_GQA = dict(num_layers=2, hidden=48, heads=6, ffn=64, seq=16, mbs=2, nmb=2, vocab=100,
                     max_pos=16, tied=False, bias=False, eps=1e-5, seed=2468, llama=dict(
                         ROPE_RMS, swiglu=True, group_query_attention=True, num_query_groups=2,
                         rotary_base=10000, rotary_percent=1.0))
CFG_LLAMA_VARIANTS = dict(num_layers=2, hidden=32, heads=4, ffn=80, seq=12, mbs=3, nmb=2,
                          vocab=90, max_pos=12, tied=True, bias=False, eps=1e-6, seed=1357,
                          llama=dict(ROPE_RMS, squared_relu=True, group_query_attention=True,
                                     num_query_groups=1, kv_channels=12, rotary_base=500000,
                                     rotary_percent=0.5, rotary_interleaved=True,
                                     use_rope_scaling=True, rope_scaling_factor=8.0,
                                     rotary_seq_len_interpolation_factor=2, add_qkv_bias=True))
CFG_LLAMA_QKNORM = dict(num_layers=2, hidden=32, heads=4, ffn=48, seq=8, mbs=2, nmb=2, vocab=64,
                        max_pos=8, tied=False, bias=False, eps=1e-5, seed=8642, llama=dict(
                            ROPE_RMS, swiglu=True, group_query_attention=True,
                            num_query_groups=2, qk_layernorm=True))
TRAIN_LLAMA = dict(lr=3e-3, min_lr=3e-4, lr_warmup_iters=2, lr_decay_iters=10, train_iters=10,
                   lr_decay_style="cosine", weight_decay=0.1, clip_grad=1.0, adam_beta1=0.9,
                   adam_beta2=0.95, adam_eps=1e-8, lr_warmup_init=0.0)


def build_model_fixture(spec, data_seed):
    cfg = make_cfg(**{k: v for k, v in spec.items() if k != "per_token_grads"})
    params32 = init_params(cfg)
    rng = np.random.default_rng(data_seed)
    batches = random_batches(rng, cfg, cfg["num_microbatches"])
    P = as_f64_leaves(params32)
    r = compute_grads(P, cfg, to_torch(batches), want_logits=True)

    fx = Fixture()
    add_model_config(fx, cfg)
    for k, v in params32.items():
        fx.add("param." + k, v, np.float32)
    add_batches(fx, "", batches)
    fx.add("out.loss", r["loss"], np.float64)
    fx.add("out.mb_loss", np.array(r["mb_loss"]), np.float64)
    fx.add("out.logits.0", r["logits0"], np.float64)
    for k, g in r["grads"].items():
        fx.add("grad." + k, g, np.float64)
    if spec.get("per_token_grads"):
        rt = compute_grads(P, cfg, to_torch(batches), per_token=True)
        for k, g in rt["grads"].items():
            fx.add("grad_per_token." + k, g, np.float64)
    gnorm = math.sqrt(sum(float((g * g).sum()) for g in r["grads"].values()))
    summary = "loss %.6f  mb_loss %s  tokens %d  grad-norm %.6f" % (
        r["loss"], " ".join("%.6f" % x for x in r["mb_loss"]), r["num_tokens"], gnorm)
    return fx, summary


def run_training(cfg, tcfg, params32, step_batches):
    """Returns (step_loss, step_grad_norm, step_lr, step_clip_coeff, final params f64)."""
    P = as_f64_leaves(params32)
    opt = Adam(P, tcfg)
    losses, norms, lrs, coeffs = [], [], [], []
    for t, batches in enumerate(step_batches):
        r = compute_grads(P, cfg, to_torch(batches))
        grads = r["grads"]
        total, coeff = clip_grads(grads, tcfg["clip_grad"])
        lr = lr_at(t * cfg["global_batch_size"], tcfg)
        opt.step(P, grads, lr)
        losses.append(r["loss"])
        norms.append(total)
        lrs.append(lr)
        coeffs.append(coeff)
    return losses, norms, lrs, coeffs, {k: v.detach().clone() for k, v in P.items()}


def build_train_fixture(spec, train, data_seed):
    cfg = make_cfg(**spec)
    tcfg = dict(train, global_batch_size=cfg["global_batch_size"])
    params32 = init_params(cfg)
    rng = np.random.default_rng(data_seed)
    stream = make_stream(rng, cfg["vocab_size"], 20000)
    step_batches = [lm_batches(rng, stream, cfg, cfg["num_microbatches"])
                    for _ in range(train["train_iters"])]
    losses, norms, lrs, coeffs, final = run_training(cfg, tcfg, params32, step_batches)
    n_clipped = sum(c < 1.0 for c in coeffs)
    assert 0 < n_clipped, "clipping never active: lower clip_grad"
    assert losses[-1] < losses[0], "loss did not fall"

    fx = Fixture()
    add_model_config(fx, cfg)
    for k, v in train.items():
        fx.add_config(k, DECAY_STYLES[v] if k == "lr_decay_style" else v)
    for k, v in params32.items():
        fx.add("param." + k, v, np.float32)
    for t, batches in enumerate(step_batches):
        add_batches(fx, "step.%d." % t, batches)
    fx.add("out.step_loss", np.array(losses), np.float64)
    fx.add("out.step_grad_norm", np.array(norms), np.float64)
    fx.add("out.step_lr", np.array(lrs), np.float64)
    for k, v in final.items():
        fx.add("final.param." + k, v, np.float64)
    lines = ["  it  loss        grad-norm   clip-coeff  lr"]
    for t in range(len(losses)):
        lines.append("  %2d  %.6f  %.6f  %s  %.6e" % (
            t, losses[t], norms[t], "%.6f  " % coeffs[t] if coeffs[t] < 1 else "   -      ",
            lrs[t]))
    lines.append("  clipped in %d/%d steps" % (n_clipped, len(coeffs)))
    return fx, "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Self-check
# --------------------------------------------------------------------------------------------
def fd_check(cfg, label, log):
    """Autograd gradients of the backward objective against central finite differences on 12
    entries of every parameter (2-D weights scaled by 10 so the nonlinearities are exercised
    away from zero), and the reported loss against its token-weighted definition."""
    rng = np.random.default_rng(3)
    batches = to_torch(random_batches(rng, cfg, 2))
    batches[1][2][0, :] = 0.0  # a row with no loss tokens
    P = as_f64_leaves(init_params(cfg))
    with torch.no_grad():
        for k, p in P.items():
            if p.dim() == 2:
                p.mul_(10.0)
    r = compute_grads(P, cfg, batches)
    gen = torch.Generator().manual_seed(11)
    worst = 0.0
    for k, p in P.items():
        flat = p.detach().view(-1)
        idx = torch.randperm(flat.numel(), generator=gen)[:12]
        for i in idx.tolist():
            h = 1e-5
            old = flat[i].item()
            with torch.no_grad():
                flat[i] = old + h
                fp = forward_backward(P, cfg, batches)["objective"].item()
                flat[i] = old - h
                fm = forward_backward(P, cfg, batches)["objective"].item()
                flat[i] = old
            fd = (fp - fm) / (2 * h)
            ag = r["grads"][k].view(-1)[i].item()
            worst = max(worst, abs(fd - ag) / max(1e-3, abs(fd)))
            assert abs(fd - ag) <= 1e-7 + 1e-5 * abs(fd), (k, i, fd, ag)
    # Reported loss = token-weighted over microbatches.
    tot = sum(float((token_losses(gpt_forward(P, cfg, t), l) * m).sum())
              for t, l, m in batches)
    ntok = sum(float(m.sum()) for _, _, m in batches)
    assert abs(r["loss"] - tot / ntok) < 1e-12
    log("self-check: autograd vs finite differences (%s): worst |fd-ag|/max(|fd|,1e-3) %.2e"
        % (label, worst))


def check_gqa_loop(log):
    """Grouped-query attention (np=4, ng=2, hn=6 != h/np, qkv bias, RMSNorm q/k layernorm, RoPE)
    against an explicit loop over batch rows and query heads that picks each head's rows of
    linear_qkv by hand and rotates q/k pairs one at a time."""
    cfg = make_cfg(1, 8, 4, 16, 5, 2, 1, 11, 6, True, False, seed=21, llama=dict(
        position_embedding_type=1, normalization=1, group_query_attention=True,
        num_query_groups=2, kv_channels=6, add_qkv_bias=True, qk_layernorm=True))
    P = {k: v.double() for k, v in init_params(cfg).items()}
    y = torch.randn(5, 2, 8)
    pre = "decoder.layers.0.self_attention."
    got = attention(y, P, pre, cfg, llama_ref.rope_cos_sin(cfg, 5))
    W, bias = P[pre + "linear_qkv.weight"], P[pre + "linear_qkv.bias"]
    ang = llama_ref.rope_angles(cfg, 5).double()
    hn, qpg, eps = 6, 2, cfg["norm_epsilon"]

    def head(rows, x, which):
        t = x @ W[rows].t() + bias[rows]
        t = t / torch.sqrt((t * t).mean(-1, keepdim=True) + eps) * P[pre + which]
        out = t.clone()
        for p in range(5):
            for i in range(hn // 2):
                c, s = math.cos(float(ang[p, i])), math.sin(float(ang[p, i]))
                out[p, i] = t[p, i] * c - t[p, i + hn // 2] * s
                out[p, i + hn // 2] = t[p, i + hn // 2] * c + t[p, i] * s
        return out

    ctx = torch.zeros(5, 2, 4 * hn)
    for bi in range(2):
        for hd in range(4):
            g0 = (hd // qpg) * (qpg + 2) * hn  # first row of the head's query group
            q = head(slice(g0 + (hd % qpg) * hn, g0 + (hd % qpg + 1) * hn), y[:, bi],
                     "q_layernorm.weight")
            k = head(slice(g0 + qpg * hn, g0 + (qpg + 1) * hn), y[:, bi], "k_layernorm.weight")
            v = y[:, bi] @ W[g0 + (qpg + 1) * hn:g0 + (qpg + 2) * hn].t() \
                + bias[g0 + (qpg + 1) * hn:g0 + (qpg + 2) * hn]
            for i in range(5):
                sc = torch.tensor([float(q[i] @ k[j]) / math.sqrt(hn) if j <= i else -10000.0
                                   for j in range(5)])
                pr = torch.exp(sc - sc.max())
                ctx[i, bi, hd * hn:(hd + 1) * hn] = (pr / pr.sum()) @ v
    ref = ctx @ P[pre + "linear_proj.weight"].t()
    assert torch.allclose(got, ref, atol=1e-12), (got - ref).abs().max()
    log("self-check: grouped-query attention (q/k norm, RoPE) matches an explicit loop")


# Tiny Llama models with every option on between them (swiglu and squared ReLU exclude each
# other): GQA + RMSNorm + RMSNorm q/k norm + rope; MQA + LayerNorm q/k norm (with bias) +
# interleaved partial rope with Llama 3.1 scaling (a blended band) and interpolation; biases +
# swiglu (fc1 bias [2f]) + no position embedding.
TINY_LLAMA = [
    ("gqa swiglu rmsnorm qk-norm rope qkv-bias",
     dict(num_layers=2, hidden=8, heads=4, ffn=12, seq=5, mbs=2, nmb=2, vocab=11, max_pos=6,
          tied=False, bias=False, seed=7, llama=dict(
              position_embedding_type=1, normalization=1, swiglu=True,
              group_query_attention=True, num_query_groups=2, kv_channels=4, add_qkv_bias=True,
              qk_layernorm=True))),
    ("mqa squared-relu layernorm qk-norm rope interleaved 0.5 scaling interpolation",
     dict(num_layers=2, hidden=8, heads=2, ffn=12, seq=6, mbs=2, nmb=2, vocab=11, max_pos=6,
          tied=True, bias=False, eps=1e-6, seed=8, llama=dict(
              position_embedding_type=1, normalization=0, squared_relu=True,
              group_query_attention=True, num_query_groups=1, kv_channels=16,
              rotary_base=1000000, rotary_percent=0.5, rotary_interleaved=True,
              use_rope_scaling=True, rope_scaling_factor=8.0,
              rotary_seq_len_interpolation_factor=2, add_qkv_bias=True, qk_layernorm=True))),
    ("bias swiglu no-position qk-norm",
     dict(num_layers=2, hidden=8, heads=2, ffn=12, seq=5, mbs=2, nmb=2, vocab=11, max_pos=6,
          tied=True, bias=True, seed=9, llama=dict(
              position_embedding_type=2, swiglu=True, qk_layernorm=True))),
]


def check_llama(log):
    llama_ref.self_check_ops(log)
    check_gqa_loop(log)
    for label, spec in TINY_LLAMA:
        fd_check(make_cfg(**spec), label, log)


def self_check(verbose=True):
    def log(*a):
        if verbose:
            print(*a)

    torch.manual_seed(0)
    # Building blocks against torch's own implementations.
    x = torch.randn(7, 5, 13)
    w, b = torch.randn(13), torch.randn(13)
    assert torch.allclose(layer_norm(x, w, b, 1e-5),
                          torch.nn.functional.layer_norm(x, (13,), w, b, 1e-5), atol=1e-12)
    assert torch.allclose(gelu_tanh(x), torch.nn.functional.gelu(x, approximate="tanh"),
                          atol=1e-12)
    assert torch.allclose(gelu_erf(x), torch.nn.functional.gelu(x), atol=1e-12)
    lg, lb = torch.randn(6, 3, 17), torch.randint(0, 17, (3, 6))
    ce = torch.nn.functional.cross_entropy(lg.reshape(-1, 17), lb.t().reshape(-1),
                                           reduction="none").view(6, 3).t()
    assert torch.allclose(token_losses(lg, lb), ce, atol=1e-12)
    log("self-check: layer_norm / gelu(tanh, erf) / cross-entropy match torch")

    # Attention against a straightforward per-head loop over the [q k v]-per-head layout.
    cfg = make_cfg(1, 8, 2, 16, 5, 2, 1, 11, 6, True, True)
    P = {k: v.double() for k, v in init_params(cfg).items()}
    y = torch.randn(5, 2, 8)
    pre = "decoder.layers.0.self_attention."
    got = attention(y, P, pre, cfg)
    Wq, bq = P[pre + "linear_qkv.weight"], P[pre + "linear_qkv.bias"]
    ctx = torch.zeros(5, 2, 8)
    for bi in range(2):
        for hd in range(2):
            rows = slice(hd * 12, hd * 12 + 12)
            qkv = y[:, bi] @ Wq[rows].t() + bq[rows]
            q, k, v = qkv[:, :4], qkv[:, 4:8], qkv[:, 8:]
            for i in range(5):
                sc = torch.tensor([float(q[i] @ k[j]) / 2.0 if j <= i else -10000.0
                                   for j in range(5)])
                pr = torch.exp(sc - sc.max())
                pr = pr / pr.sum()
                ctx[i, bi, hd * 4:(hd + 1) * 4] = pr @ v
    ref = ctx @ P[pre + "linear_proj.weight"].t() + P[pre + "linear_proj.bias"]
    assert torch.allclose(got, ref, atol=1e-12)
    log("self-check: attention matches an explicit per-head loop")

    # Autograd against central finite differences on tiny models (both variants, with masked
    # tokens and two microbatches, so the loss normalisation is part of the check).
    for tied, bias in ((True, True), (False, False)):
        fd_check(make_cfg(2, 8, 2, 12, 5, 2, 2, 11, 6, tied, bias, seed=7),
                 "tied=%d bias=%d" % (tied, bias), log)
    check_llama(log)

    # Hand Adam + clipping against torch.optim.AdamW + clip_grad_norm_.
    params = {"a.weight": torch.randn(4, 3), "a.bias": torch.randn(4), "ln.weight": torch.randn(3)}
    tcfg = dict(adam_beta1=0.9, adam_beta2=0.95, adam_eps=1e-8, weight_decay=0.1)
    mine = {k: v.clone() for k, v in params.items()}
    theirs = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    opt = Adam(mine, tcfg)
    groups = [{"params": [theirs[k]], "weight_decay": 0.1 * wd_mult(k, tuple(v.shape))}
              for k, v in params.items()]
    topt = torch.optim.AdamW(groups, lr=1.0, betas=(0.9, 0.95), eps=1e-8)
    for step in range(5):
        grads = {k: torch.randn_like(v) * (3.0 if step % 2 else 0.1) for k, v in params.items()}
        lr = 1e-2 * (step + 1)
        g2 = {k: g.clone() for k, g in grads.items()}
        total, _ = clip_grads(g2, 1.0)
        for k in theirs:
            theirs[k].grad = grads[k].clone()
        ttotal = torch.nn.utils.clip_grad_norm_(list(theirs.values()), 1.0)
        assert abs(total - float(ttotal)) < 1e-12
        opt.step(mine, g2, lr)
        for gr in topt.param_groups:
            gr["lr"] = lr
        topt.step()
        for k in mine:
            assert torch.allclose(mine[k], theirs[k].detach(), atol=1e-12), k
    log("self-check: Adam + clipping match torch.optim.AdamW + clip_grad_norm_")

    # LR schedule spot values.
    t = dict(TRAIN_TIED_BIAS, global_batch_size=4)
    assert lr_at(0, t) == 0.0 and abs(lr_at(4, t) - 2.5e-3) < 1e-15 and lr_at(8, t) == 5e-3
    assert abs(lr_at(24, t) - (5e-4 + 0.5 * 4.5e-3)) < 1e-15 and lr_at(41, t) == 5e-4
    t = dict(TRAIN_UNTIED_NOBIAS, global_batch_size=6)
    assert lr_at(0, t) == 2e-3 and abs(lr_at(30, t) - (1e-4 + 0.5 * 1.9e-3)) < 1e-15
    t = dict(t, lr_decay_style="inverse-square-root", lr_warmup_iters=1)
    assert abs(lr_at(24, t) - 2e-3 * math.sqrt(6) / math.sqrt(24)) < 1e-15
    assert lr_at(6, dict(t, lr_decay_style="constant")) == 2e-3
    log("self-check: LR schedule spot values")

    # Writer round trip.
    fx = Fixture()
    fx.add("a", np.arange(6).reshape(2, 3), np.int32)
    fx.add("b", 2.5, np.float64)
    fx.add_config("c", 7)
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        fx.write(os.path.join(d, "x.mcfx"))
        rr = read_mcfx(os.path.join(d, "x.mcfx"))
    assert rr["a"].dtype == np.int32 and rr["a"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert rr["b"].shape == () and float(rr["b"]) == 2.5 and rr["config.c"].dtype == np.int64
    log("self-check: MCFX writer round trip")
    log("self-check: OK")


# --------------------------------------------------------------------------------------------
def main(argv):
    if "--self-check" in argv:
        self_check()
        return 0
    if len(argv) < 2:
        print(__doc__)
        return 2
    outdir = argv[1]
    os.makedirs(outdir, exist_ok=True)
    torch.set_num_threads(1)
    self_check(verbose=False)
    print("self-check passed (autograd vs finite differences, Adam vs torch.optim.AdamW)")
    jobs = [
        ("gpt_tied_bias.mcfx", lambda: build_model_fixture(CFG_TIED_BIAS, 101)),
        ("gpt_untied_nobias.mcfx", lambda: build_model_fixture(CFG_UNTIED_NOBIAS, 202)),
        ("gpt_postln_pertoken.mcfx", lambda: build_model_fixture(CFG_POSTLN, 505)),
        ("train_tied_bias.mcfx", lambda: build_train_fixture(CFG_TIED_BIAS, TRAIN_TIED_BIAS, 303)),
        ("train_untied_nobias.mcfx",
         lambda: build_train_fixture(CFG_UNTIED_NOBIAS, TRAIN_UNTIED_NOBIAS, 404)),
        ("llama_gqa.mcfx", lambda: build_model_fixture(CFG_LLAMA_GQA, 606)),
        ("llama_variants.mcfx", lambda: build_model_fixture(CFG_LLAMA_VARIANTS, 707)),
        ("llama_qknorm.mcfx", lambda: build_model_fixture(CFG_LLAMA_QKNORM, 808)),
        ("train_llama.mcfx", lambda: build_train_fixture(CFG_LLAMA_GQA, TRAIN_LLAMA, 909)),
    ]
    only = argv[2:]  # optional fixture names: write just those
    assert set(only) <= {f for f, _ in jobs}, set(only) - {f for f, _ in jobs}
    for fname, job in jobs:
        if only and fname not in only:
            continue
        fx, summary = job()
        path = os.path.join(outdir, fname)
        size = fx.write(path)
        print("%s: %d records, %d bytes" % (path, len(fx.records), size))
        print("  " + summary if "\n" not in summary else summary)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
