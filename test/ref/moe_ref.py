"""Megatron-LM's own MoE arithmetic, for test/unit/kernels/test_kernels_moe.c (test/fixtures/moe_ops.mcfx).

Runs megatron/core/transformer/moe/moe_utils.py of a Megatron-LM checkout (core_v0.15.0), its
megatron imports stubbed (the functions used here touch no process group), on Debian's torch
(CPU): topk_routing_with_score_function (softmax before and after the top-k, sigmoid with and
without the expert bias, group-limited routing, scaling, fp32 / fp64 / bf16 router types),
apply_router_token_dropping (both drop policies, padded or not),
compute_routing_scores_for_aux_loss with switch_load_balancing_loss_func (aux_loss, and
seq_aux_loss as router.py reshapes it), z_loss_func, permute / unpermute / sort_chunks_by_idxs,
and the gradients torch's autograd takes through them. The expert linear layers are torch
matmuls and get_updated_expert_bias's arithmetic is restated without its all-reduce.

torch.topk is replaced by CUDA's selection (aten/src/ATen/native/cuda/TensorTopK.cu: the values
above the k-th, then the lowest indices among those equal to it), which a stable descending sort
gives: Megatron trains on GPUs, and CPU torch breaks ties by its sort's internals. The fixture
rows include exact ties, where that matters.

    git -C MEGATRON show core_v0.15.0:megatron/core/transformer/moe/moe_utils.py > /tmp/moe_utils.py
    /usr/bin/python3 test/ref/moe_ref.py /tmp/moe_utils.py test/fixtures/moe_ops.mcfx
"""
import math
import os
import sys
import types

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_ref import Fixture  # noqa: E402  (the MCFX writer)

torch.set_default_dtype(torch.float32)
torch.set_num_threads(1)
F32, F64, I32 = np.float32, np.float64, np.int32


def cuda_topk(x, k, dim=-1, largest=True, sorted=True):
    """torch.topk as CUDA chooses: stable sort, descending (largest) or ascending."""
    v, i = torch.sort(x, dim=dim, descending=largest, stable=True)
    return torch.return_types.topk((v.narrow(dim, 0, k), i.narrow(dim, 0, k)))


def load_megatron(path):
    for name in ["megatron", "megatron.core", "megatron.core.parallel_state",
                 "megatron.core.process_groups_config"]:
        sys.modules[name] = types.ModuleType(name)
    sys.modules["megatron.core"].parallel_state = sys.modules["megatron.core.parallel_state"]
    sys.modules["megatron.core.process_groups_config"].ProcessGroupCollection = object
    g = {"__name__": "moe_utils"}
    exec(compile(open(path).read(), path, "exec"), g)
    torch.topk = cuda_topk
    torch.Tensor.topk = lambda self, k, dim=-1, largest=True, sorted=True: cuda_topk(
        self, k, dim, largest, sorted)
    return g


def logits_with_ties(T, E, gen, dtype):
    x = torch.randn(T, E, generator=gen, dtype=torch.float64)
    x[3, 2] = x[3, 5]                   # a tie inside a row
    x[4, :] = 0.25                      # a row of equal values
    x[5, 1] = x[5, 0] = x[5].max() + 1  # two equal largest
    return x.to(dtype)


def router_case(fx, M, name, T, E, dtype, gen, **kw):
    """probs, map and the logits' gradient of topk_routing_with_score_function."""
    logits = logits_with_ties(T, E, gen, dtype).requires_grad_()
    bias = None
    if kw.pop("bias", False):
        bias = (torch.randn(E, generator=gen) * 0.1).to(torch.float32)
        bias[1] = bias[0]
    probs, rmap = M["topk_routing_with_score_function"](logits, **kw, expert_bias=bias)
    dprobs = torch.randn(T, E, generator=gen, dtype=torch.float64).to(dtype)
    (dl,) = torch.autograd.grad(probs, logits, dprobs)
    fx.add(name + ".logits", logits.detach().double(), F64)
    fx.add(name + ".dprobs", dprobs.double(), F64)
    if bias is not None:
        fx.add(name + ".bias", bias, F32)
    fx.add(name + ".probs", probs.detach().double(), F64)
    fx.add(name + ".map", rmap.int(), I32)
    fx.add(name + ".dlogits", dl.double(), F64)
    return probs.detach(), rmap


def routers(fx, M, gen):
    cases = [
        ("softmax_k2", 40, 8, torch.float32, dict(topk=2)),
        ("pre_k1", 40, 6, torch.float32, dict(topk=1, use_pre_softmax=True)),
        ("sigmoid_bias", 40, 8, torch.float32,
         dict(topk=3, score_function="sigmoid", bias=True, scaling_factor=2.5)),
        ("sigmoid_k1_f64", 40, 8, torch.float64, dict(topk=1, score_function="sigmoid")),
        ("group_pre", 40, 16, torch.float32,
         dict(topk=4, use_pre_softmax=True, num_groups=4, group_topk=2)),
        ("group_sigmoid_bias", 40, 16, torch.float32,
         dict(topk=4, score_function="sigmoid", bias=True, num_groups=4, group_topk=2,
              scaling_factor=2.5)),
        ("softmax_bf16", 40, 8, torch.bfloat16, dict(topk=2)),
    ]
    out = {}
    for name, T, E, dt, kw in cases:
        out[name] = router_case(fx, M, "route." + name, T, E, dt, gen, **dict(kw))
    return out


def capacity(fx, M, probs, rmap):
    T, E = probs.shape
    for name, policy, pad in [("probs", "probs", False), ("probs_pad", "probs", True),
                              ("position", "position", False), ("position_pad", "position", True)]:
        p, m = M["apply_router_token_dropping"](probs, rmap, router_topk=2, capacity_factor=0.5,
                                                drop_policy=policy, pad_to_capacity=pad)
        fx.add("capacity.%s.probs" % name, p.double(), F64)
        fx.add("capacity.%s.keep" % name, m.int(), I32)
    fx.add("capacity.capacity", M["get_capacity"](T * 2, E, 0.5), np.int64)


def aux_losses(fx, M, gen):
    S, B, E, k, coeff = 10, 4, 8, 2, 1e-2
    for score in ["softmax", "sigmoid"]:
        logits = logits_with_ties(S * B, E, gen, torch.float32).requires_grad_()
        rmap, scores = M["compute_routing_scores_for_aux_loss"](logits, k, score)
        counts = rmap.sum(dim=0).float()
        aux = M["switch_load_balancing_loss_func"](scores, counts, S * B, k, E, coeff)
        (dl,) = torch.autograd.grad(aux, logits, retain_graph=True)
        pre = "aux.%s." % score
        fx.add(pre + "logits", logits.detach().double(), F64)
        fx.add(pre + "counts", counts, F32)
        fx.add(pre + "psum", scores.detach().sum(dim=0).double(), F64)
        fx.add(pre + "loss", aux.detach().double(), F64)
        fx.add(pre + "dlogits", dl.double(), F64)
        # seq_aux_loss as router.py computes it: tokens [s, b] reshaped to [s, b * E]
        s2 = scores.reshape(S, -1)
        c2 = rmap.reshape(S, -1).sum(dim=0).float()
        seq = M["switch_load_balancing_loss_func"](s2, c2, S, k, E, coeff) / B
        (dl2,) = torch.autograd.grad(seq, logits)
        fx.add(pre + "seq_counts", c2, F32)
        fx.add(pre + "seq_psum", s2.detach().sum(dim=0).double(), F64)
        fx.add(pre + "seq_loss", seq.detach().double(), F64)
        fx.add(pre + "seq_dlogits", dl2.double(), F64)
    logits = logits_with_ties(S * B, E, gen, torch.float32).requires_grad_()
    z = M["z_loss_func"](logits, 1e-3)
    (dz,) = torch.autograd.grad(z, logits)
    fx.add("z.logits", logits.detach().double(), F64)
    fx.add("z.loss", z.detach().double(), F64)
    fx.add("z.dlogits", dz.double(), F64)


def permutation(fx, M, gen, probs, rmap):
    T, E = rmap.shape
    H = 6
    tokens = torch.randn(T, H, generator=gen)
    n = int(rmap.sum())
    ptok, pprobs, rows = M["permute"](tokens, rmap, probs=probs, num_out_tokens=n)
    fx.add("perm.tokens", tokens, F32)
    fx.add("perm.rows", rows.int(), I32)
    fx.add("perm.permuted", ptok, F32)
    fx.add("perm.pprobs", pprobs, F32)
    x = torch.randn(n, H, generator=gen).requires_grad_()
    out = M["unpermute"](x, rows, tokens.shape, routing_map=rmap)
    fx.add("perm.x", x.detach(), F32)
    fx.add("perm.unpermuted", out.detach(), F32)
    pp = probs.clone().requires_grad_()
    outp = M["unpermute"](x, rows, tokens.shape, probs=pp, routing_map=rmap)
    dout = torch.randn(T, H, generator=gen)
    dx, dprobs = torch.autograd.grad(outp, [x, pp], dout)
    fx.add("perm.unpermuted_probs", outp.detach(), F32)
    fx.add("perm.dout", dout, F32)
    fx.add("perm.dx", dx, F32)
    # the gradient at the permuted probs: permute's masked_select order
    fx.add("perm.dpprobs", dprobs.T.contiguous().masked_select(rmap.T.contiguous()), F32)
    # sort_chunks_by_idxs as the alltoall dispatcher sorts ep 2 x 2 local experts by expert
    sizes = torch.tensor([3, 0, 5, 2])
    order = torch.arange(4).reshape(-1, 2).T.ravel()
    rows_in = torch.randn(int(sizes.sum()), H, generator=gen)
    sorted_rows, _ = M["sort_chunks_by_idxs"](rows_in, sizes, order)
    fx.add("chunks.sizes", sizes, np.int64)
    fx.add("chunks.order", order.int(), I32)
    fx.add("chunks.in", rows_in, F32)
    fx.add("chunks.out", sorted_rows, F32)


def experts(fx, gen):
    """The local experts' fc layers: per expert x_g @ W_g^T, their gradients; probs between."""
    m, K, N = [3, 0, 5, 2], 7, 5
    W = torch.randn(len(m), N, K, generator=gen, dtype=torch.float64).requires_grad_()
    x = torch.randn(sum(m), K, generator=gen, dtype=torch.float64).requires_grad_()
    outs, at = [], 0
    for g, mg in enumerate(m):
        outs.append(x[at:at + mg] @ W[g].T)
        at += mg
    out = torch.cat(outs)
    dout = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    dx, dW = torch.autograd.grad(out, [x, W], dout)
    for key, val in [("m", torch.tensor(m)), ("W", W), ("x", x), ("out", out), ("dout", dout),
                     ("dx", dx), ("dW", dW)]:
        fx.add("gemm." + key, val.detach(), np.int64 if key == "m" else F64)
    # the probs applied inside the experts (mlp.py), and the expert bias update
    p = torch.rand(sum(m), generator=gen).requires_grad_()
    xs = x.detach().float().requires_grad_()
    y = xs * p.unsqueeze(-1)
    dy = torch.randn(y.shape, generator=gen)
    dxs, dp = torch.autograd.grad(y, [xs, p], dy)
    for key, val in [("x", xs), ("p", p), ("y", y), ("dy", dy), ("dx", dxs), ("dp", dp)]:
        fx.add("scale." + key, val.detach(), F32)
    counts = torch.tensor([5., 9., 0., 6., 6., 4.])
    bias = torch.tensor([0.1, -0.2, 0.0, 0.05, 0.3, -0.01])
    avg = counts.sum(dim=-1, keepdim=True) / counts.shape[-1]
    new_bias = bias + torch.sign(avg - counts) * 1e-3
    for key, val in [("counts", counts), ("bias", bias), ("updated", new_bias)]:
        fx.add("bias." + key, val, F32)


def main():
    M = load_megatron(sys.argv[1])
    gen = torch.Generator().manual_seed(31)
    fx = Fixture()
    routes = routers(fx, M, gen)
    capacity(fx, M, *routes["softmax_k2"])
    aux_losses(fx, M, gen)
    permutation(fx, M, gen, *routes["softmax_k2"])
    experts(fx, gen)
    n = fx.write(sys.argv[2])
    print("%s: %d records, %d bytes" % (sys.argv[2], len(fx.records), n))


if __name__ == "__main__":
    main()
