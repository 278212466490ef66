"""The Llama block's building blocks for gpt_ref.py (float64 unless stated): RMSNorm, SwiGLU,
squared ReLU and rotary position embeddings as Megatron-LM computes them, with their self-checks.

Megatron's RoPE (RotaryEmbedding, rope_utils._apply_rotary_pos_emb_bshd) builds the rotation
angles in float32: inv_freq = 1 / base^(arange(0, rot_dim, 2) / rot_dim) (float32 pow), the Llama
3.1 rescaling of inv_freq (float32), positions 0..S-1 (float32, times 1/interpolation factor) and
their outer product (float32). Only cos/sin and the rotation itself are taken to float64 here, so
the angles are bit-identical to Megatron's and the C side can rebuild them exactly.
"""
import math

import torch
import torch.nn.functional as F

# Llama 3.1 rescaling constants (Megatron's RotaryEmbedding._apply_scaling defaults).
ROPE_LOW_FREQ_FACTOR = 1.0
ROPE_HIGH_FREQ_FACTOR = 4.0
ROPE_ORIGINAL_CONTEXT = 8192


def rms_norm(x, w, eps):
    """torch.nn.RMSNorm: x / sqrt(mean(x^2) + eps) * w over the last dim (no bias)."""
    return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps) * w


def swiglu(y):
    """--swiglu: y = [gate | up] (linear_fc1 rows [gate; up]) -> silu(gate) * up."""
    gate, up = torch.chunk(y, 2, dim=-1)
    return gate * torch.sigmoid(gate) * up


def squared_relu(y):
    """--squared-relu: relu(y)^2."""
    return torch.relu(y) ** 2


def rope_scale_inv_freq(inv_freq, factor):
    """Llama 3.1 rescaling of a float32 inv_freq (Megatron's _apply_scaling, float32 math):
    wavelengths above original_context/low_factor are divided by factor, those below
    original_context/high_factor kept, the band between blended by a smooth factor."""
    low_wavelen = ROPE_ORIGINAL_CONTEXT / ROPE_LOW_FREQ_FACTOR
    high_wavelen = ROPE_ORIGINAL_CONTEXT / ROPE_HIGH_FREQ_FACTOR
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (ROPE_ORIGINAL_CONTEXT / wavelen - ROPE_LOW_FREQ_FACTOR) / (
        ROPE_HIGH_FREQ_FACTOR - ROPE_LOW_FREQ_FACTOR)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, blended, scaled)


def rope_rot_dim(cfg):
    kv = cfg["kv_channels"]
    pct = cfg["rotary_percent"]
    return int(kv * pct) if pct < 1.0 else kv


def rope_angles(cfg, seq_len):
    """float32 [seq_len, rot_dim/2]: angle of position p and frequency i, as Megatron builds it."""
    dim = rope_rot_dim(cfg)
    expo = torch.arange(0, dim, 2, dtype=torch.float32) / dim
    inv_freq = 1.0 / (cfg["rotary_base"] ** expo)
    if cfg["use_rope_scaling"]:
        inv_freq = rope_scale_inv_freq(inv_freq, cfg["rope_scaling_factor"])
    pos = torch.arange(seq_len, dtype=torch.float32)
    if cfg["rotary_seq_len_interpolation_factor"]:
        pos *= 1 / cfg["rotary_seq_len_interpolation_factor"]
    return torch.outer(pos, inv_freq)


def rope_cos_sin(cfg, seq_len):
    """float64 cos and sin [seq_len, rot_dim/2] of the float32 angles."""
    ang = rope_angles(cfg, seq_len).to(torch.float64)
    return torch.cos(ang), torch.sin(ang)


def apply_rope(t, cos, sin, interleaved):
    """t: [s, b, heads, hn]; rotates the first rot_dim = 2*cos.shape[-1] channels of each head
    (Megatron's t*cos + rotate_half(t)*sin): pairs (i, i + rot_dim/2), or (2i, 2i+1) when
    interleaved, turn by the angle of (position, frequency i)."""
    rot = 2 * cos.shape[-1]
    x, rest = t[..., :rot], t[..., rot:]
    if interleaved:
        c = cos.repeat_interleave(2, dim=-1)[:, None, None, :]
        s = sin.repeat_interleave(2, dim=-1)[:, None, None, :]
        half = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).reshape(x.shape)
    else:
        c = torch.cat((cos, cos), dim=-1)[:, None, None, :]
        s = torch.cat((sin, sin), dim=-1)[:, None, None, :]
        x1, x2 = torch.chunk(x, 2, dim=-1)
        half = torch.cat((-x2, x1), dim=-1)
    return torch.cat((x * c + half * s, rest), dim=-1)


# --------------------------------------------------------------------------------------------
# Self-checks of the building blocks
# --------------------------------------------------------------------------------------------
def check_rope_complex(cfg, log):
    """apply_rope against an explicit complex rotation z * exp(i*angle) of every pair."""
    s, b, heads, hn = 7, 2, 3, cfg["kv_channels"]
    t = torch.randn(s, b, heads, hn)
    cos, sin = rope_cos_sin(cfg, s)
    got = apply_rope(t, cos, sin, cfg["rotary_interleaved"])
    ang = rope_angles(cfg, s).to(torch.float64)
    half = ang.shape[-1]
    want = t.clone()
    for p in range(s):
        for i in range(half):
            a, c = (2 * i, 2 * i + 1) if cfg["rotary_interleaved"] else (i, i + half)
            z = torch.complex(t[p, :, :, a], t[p, :, :, c]) * complex(
                math.cos(float(ang[p, i])), math.sin(float(ang[p, i])))
            want[p, :, :, a], want[p, :, :, c] = z.real, z.imag
    assert torch.allclose(got, want, atol=1e-13, rtol=0), (got - want).abs().max()
    log("self-check: RoPE (rot_dim %d of %d, interleaved=%d) matches a complex rotation"
        % (2 * half, hn, cfg["rotary_interleaved"]))


def check_rope_scaling(log):
    """The float32 rescaling against the piecewise Llama 3.1 rule in float64, over a spread of
    wavelengths that covers the kept, the blended and the divided bands."""
    inv = torch.logspace(0, -6, 40, dtype=torch.float32)
    got = rope_scale_inv_freq(inv, 8.0)
    for f, g in zip(inv.tolist(), got.tolist()):
        wl = 2 * math.pi / f
        if wl < ROPE_ORIGINAL_CONTEXT / ROPE_HIGH_FREQ_FACTOR:
            want = f
        elif wl > ROPE_ORIGINAL_CONTEXT / ROPE_LOW_FREQ_FACTOR:
            want = f / 8.0
        else:
            sm = (ROPE_ORIGINAL_CONTEXT / wl - 1.0) / 3.0
            want = (1 - sm) * f / 8.0 + sm * f
        assert abs(g - want) <= 1e-6 * want, (f, g, want)
    n_mid = sum(1 for f in inv.tolist()
                if 2048 <= 2 * math.pi / f <= 8192)
    assert n_mid > 0
    log("self-check: RoPE Llama 3.1 rescaling matches the piecewise rule (%d blended)" % n_mid)


def self_check_ops(log):
    torch.manual_seed(5)
    x, w = torch.randn(6, 4, 10), torch.randn(10)
    want = torch.stack([x[i, j] / math.sqrt(float((x[i, j] ** 2).mean()) + 1e-6) * w
                        for i in range(6) for j in range(4)]).view(6, 4, 10)
    assert torch.allclose(rms_norm(x, w, 1e-6), want, atol=1e-12)
    y = torch.randn(5, 3, 14)
    assert torch.allclose(swiglu(y), F.silu(y[..., :7]) * y[..., 7:], atol=1e-14)
    assert torch.equal(squared_relu(y), torch.pow(F.relu(y), 2))
    log("self-check: rms_norm / swiglu / squared_relu match explicit formulas")
    base = dict(kv_channels=12, rotary_percent=1.0, rotary_base=10000, use_rope_scaling=0,
                rope_scaling_factor=8.0, rotary_seq_len_interpolation_factor=0,
                rotary_interleaved=0)
    check_rope_complex(base, log)
    check_rope_complex(dict(base, rotary_percent=0.5, rotary_interleaved=1, rotary_base=500000,
                            use_rope_scaling=1, rotary_seq_len_interpolation_factor=2), log)
    check_rope_scaling(log)
    # Spot values: position 3, frequency 0 with interpolation factor 2 turns by 1.5 rad; with
    # base 500000 and rot_dim 6 the rescaling divides the lowest frequency (wavelength ~40000)
    # by the factor and keeps the other two (wavelengths 6 and 500).
    a = rope_angles(dict(base, rotary_seq_len_interpolation_factor=2), 4)
    assert float(a[3, 0]) == 1.5 and a.dtype == torch.float32
    llama3 = dict(base, rotary_base=500000, rotary_percent=0.5)
    plain, scaled = rope_angles(llama3, 5), rope_angles(dict(llama3, use_rope_scaling=1), 5)
    assert torch.equal(scaled[:, :2], plain[:, :2]) and torch.equal(scaled[:, 2], plain[:, 2] / 8)
