"""PyTorch reference for megatron-c's Muon (test/tools/muon_steps output on stdin): Megatron
main's TensorParallelMuon (megatron/core/optimizer/emerging_optimizers.py) over
emerging_optimizers' OrthogonalizedOptimizer.step and newton_schulz, written from their code, with
torch.optim.AdamW (Megatron's Adam with decoupled weight decay) for the parameters Megatron routes
to Adam (_is_muon_excluded: is_embedding_or_output_parameter or ndim != 2).
  muon_ref.py [FILE NESTEROV PREC COEFFS SCALE SPLIT_QKV TOL]...   (FILE: muon_steps' output)
Prints a line per case: "CASE ok|FAILED largest difference D (tolerance TOL)"; exits 1 when a case
is above its tolerance; prints "SKIP <why>" and exits 0 without torch."""
import math
import sys

try:
    import torch
except ImportError as e:
    print(f"SKIP torch is not importable ({e})")
    sys.exit(0)

COEFFS = {
    "quintic": [(4.0848, -6.8946, 2.9270), (3.9505, -6.3029, 2.6377), (3.7418, -5.5913, 2.3037),
                (2.8769, -3.1427, 1.2046), (2.8366, -3.0525, 1.2012)],
    "simple": [(3.4445, -4.7750, 2.0315)],
    "polar_express": [(8.2051, -22.9019, 16.4607), (4.0664, -2.8612, 0.5184),
                      (3.9096, -2.8234, 0.5250), (3.2856, -2.4153, 0.4853),
                      (2.2779, -1.6198, 0.3985), (1.8726, -1.2307, 0.3585),
                      (1.8564, -1.2132, 0.3568), (1.8750, -1.2500, 0.3750)],
}
REPEAT_LAST = ("polar_express", "cans", "deepseekv4")


def newton_schulz(x, steps, kind, bf16):
    """bf16 (--muon-fp32-matmul-prec medium): the iterate in bf16 and each GEMM as a GPU's bf16
    GEMM with fp32 compute, alpha A B + beta C rounded once (CPU PyTorch's bf16 addmm rounds its
    terms apart, so it is emulated in fp32)."""
    r = (lambda t: t.bfloat16().float()) if bf16 else (lambda t: t)
    transpose = x.size(-2) > x.size(-1)
    if transpose:
        x = x.mT
    X = r(torch.nn.functional.normalize(x, p=2, dim=(-2, -1), eps=1e-15))
    sets = COEFFS[kind]
    for i in range(steps):
        a, b, c = sets[min(i, len(sets) - 1)] if kind in REPEAT_LAST else sets[i % len(sets)]
        A = r(X @ X.mT)
        B = r(torch.addmm(A, A, A, alpha=c, beta=b))
        X = r(torch.addmm(X, B, X, alpha=1.0, beta=a))
    return X.mT if transpose else X


def scale(rows, cols, mode):
    if mode == "shape_scaling":
        return max(1, rows / cols) ** 0.5
    if mode == "unit_rms_norm":
        return (rows / cols) ** 0.5
    return max(rows, cols) ** 0.5


def orthogonalize(g, kind, bf16, mode, split_qkv, qkv, heads, groups, head_dim):
    def one(m):
        return newton_schulz(m, 5, kind, bf16) * scale(m.size(0), m.size(1), mode) * 1.0
    if not (split_qkv and qkv):
        return one(g)
    shapes = [heads // groups * head_dim, head_dim, head_dim]
    parts = torch.split(g.view(groups, sum(shapes), -1), shapes, dim=1)
    parts = [one(p.reshape(-1, g.shape[-1])).view(groups, -1, g.shape[-1]) for p in parts]
    return torch.cat(parts, dim=1).view(g.shape)


def check(path, nesterov, prec, kind, mode, split_qkv, tol):
    params, grads, init, final, heads = [], [], None, None, None
    for line in open(path):
        f = line.split()
        if f[0] == "P":
            params.append((f[1], int(f[2]), int(f[3]), f[4] == "1", f[5] == "1", f[6] == "1"))
        elif f[0] == "H":
            heads = [int(v) for v in f[1:]]
        elif f[0] in "IGF":
            t = torch.tensor([float(v) for v in f[1:]], dtype=torch.float32)
            if f[0] == "I":
                init = t
            elif f[0] == "G":
                grads.append(t)
            else:
                final = t
    lr, wd, momentum = 0.01, 0.1, 0.9
    tensors, at = [], 0
    for name, rows, cols, qkv, emb, no_wd in params:
        n = rows * (cols or 1)
        shape = (rows, cols) if cols else (rows,)
        p = torch.nn.Parameter(init[at:at + n].clone().view(shape))
        tensors.append((p, at, n, qkv, emb or not cols, no_wd))
        at += n
    adam = torch.optim.AdamW([{"params": [p], "weight_decay": 0.0 if no_wd else wd}
                              for p, _, _, _, by_adam, no_wd in tensors if by_adam],
                             lr=lr, betas=(0.9, 0.95), eps=1e-8)
    bufs = {id(p): torch.zeros_like(p) for p, *_ in tensors}
    for g in grads:
        for p, off, n, qkv, by_adam, no_wd in tensors:
            p.grad = g[off:off + n].clone().view(p.shape)
            if by_adam:
                continue
            with torch.no_grad():
                if not no_wd:
                    p.add_(p, alpha=-wd * lr)
                buf = bufs[id(p)]
                buf.lerp_(p.grad, 1 - momentum)
                u = p.grad.lerp(buf, momentum) if nesterov else buf
                orth = orthogonalize(u, kind, prec == "medium", mode, split_qkv, qkv, *heads)
                p.add_(orth, alpha=-lr)
        adam.step()
    worst = max((p.detach().flatten() - final[off:off + n]).abs().max().item()
                for p, off, n, *_ in tensors)
    return worst


def main():
    torch.set_float32_matmul_precision("highest")
    failed = False
    for i in range(1, len(sys.argv), 7):
        a = sys.argv[i:i + 7]
        tol = float(a[6])
        worst = check(a[0], a[1] == "1", a[2], a[3], a[4], a[5] == "1", tol)
        failed |= worst > tol
        print(f"{' '.join(a[1:6])}: {'ok' if worst <= tol else 'FAILED'} largest difference "
              f"{worst:.3g} (tolerance {tol:g})")
    sys.exit(1 if failed else 0)


main()
