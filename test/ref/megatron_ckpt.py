#!/usr/bin/python3
"""Checkpoints in Megatron-LM's legacy layout (--ckpt-format torch, MEGATRON.md section 9), written
by torch.save with the objects Megatron-LM would pickle, for a tiny GPT. megatron-c must load them
(test/integration/test_ckpt_megatron.sh).

    /usr/bin/python3 test/ref/megatron_ckpt.py write OUT          # every variant under OUT/<name>/
    /usr/bin/python3 test/ref/megatron_ckpt.py check-saved DIR VARIANT REF
                                        # DIR: megatron-c's re-save of VARIANT at iteration 10
    /usr/bin/python3 test/ref/megatron_ckpt.py eval-loss REF TOKENS master|bf16
                                        # float64 loss of the samples in TOKENS (inspect-data ids)
    /usr/bin/python3 test/ref/megatron_ckpt.py tamper DIR KIND
                                        # one foreign or broken change to a copied variant

What is Megatron's here (megatron/training/checkpointing.py generate_state_dict, core/optimizer/
optimizer.py, distrib_optimizer.py get_parameter_state_dp_zero, core/optimizer/__init__.py
_get_param_groups, param_layout.py, gpt_layer_specs.py, Transformer Engine's LayerNormLinear):
  * model_optim_rng.pt: args (an argparse.Namespace holding torch.bfloat16, an enum member of a
    Megatron class, ...), checkpoint_version 3.0, iteration, model / model0.. (stage-local layer
    numbers, tp slices, OrderedDicts with _metadata), optimizer, opt_param_scheduler,
    rerun_state_machine, rng_state (Python, numpy, torch and CUDA generator states),
    num_floating_point_operations_so_far; storages saved from 'cuda:0';
  * optimizer: FP32Optimizer's torch state dict (fp32 runs, torch AdamW: a step tensor per
    parameter), Float16OptimizerWithFloat16Params' {optimizer, fp32_from_fp16_params} (bf16 runs
    with Transformer Engine's FusedAdam: step in the groups), DistributedOptimizer's
    {optimizer: {param_groups without params}} plus distrib_optim.pt ({buckets_coalesced, one
    entry per model chunk keyed by (param dtype, grad dtype)} with the world tensors of the
    chunk's buffer: parameters in reverse order, starts padded to 64, buckets cut at
    --ddp-bucket-size on chunk 0 of the first stage only, bucket-end padding removed);
  * parameter groups: weight-decayed first, then biases and 1-D parameters (wd_mult 0), each in
    named_parameters() order over the model chunks, which is the local spec's module order
    (input_layernorm, linear_proj, linear_qkv, ...) or Transformer Engine's (linear_proj, then
    linear_qkv.layer_norm_weight/bias, weight, bias, ...); TE's _extra_state is a BytesIO (older
    TE) or an empty uint8 tensor (TE >= 1.x).
The stand-in classes below are registered under Megatron's module paths so that pickle records
Megatron's names. Every variant holds the same full fp32 model and Adam state (REF, reference.pt):
megatron-c must load the same numbers from each."""
import argparse
import collections
import enum
import io
import math
import os
import random
import re
import signal
import sys
import types

import numpy as np
import torch

# ---- the model and run (test_ckpt_megatron.sh passes the same flags) ------------------------------
L, H, HEADS, FFN, SEQ, VOCAB, DIVISIBLE = 4, 64, 4, 256, 32, 256, 64
MBS, GBS, ITERATION, TRAIN_ITERS = 2, 8, 10, 20
LR, MIN_LR, WARMUP_ITERS, WD, SEED = 3e-3, 1e-4, 2, 0.1, 1234
EVAL_INTERVAL, EVAL_ITERS = 10, 2

# name, tensor-parallel split ('rows', 'cols' or None), per layer in the local spec's order
LAYER = [("input_layernorm.weight", None), ("input_layernorm.bias", None),
         ("self_attention.linear_proj.weight", "cols"), ("self_attention.linear_proj.bias", None),
         ("self_attention.linear_qkv.weight", "rows"), ("self_attention.linear_qkv.bias", "rows"),
         ("pre_mlp_layernorm.weight", None), ("pre_mlp_layernorm.bias", None),
         ("mlp.linear_fc1.weight", "rows"), ("mlp.linear_fc1.bias", "rows"),
         ("mlp.linear_fc2.weight", "cols"), ("mlp.linear_fc2.bias", None)]
TE_NAME = {"input_layernorm.weight": "self_attention.linear_qkv.layer_norm_weight",
           "input_layernorm.bias": "self_attention.linear_qkv.layer_norm_bias",
           "pre_mlp_layernorm.weight": "mlp.linear_fc1.layer_norm_weight",
           "pre_mlp_layernorm.bias": "mlp.linear_fc1.layer_norm_bias"}
# Transformer Engine's module order: linear_proj is built before linear_qkv, which holds the LN
TE_ORDER = [2, 3, 0, 1, 4, 5, 6, 7, 8, 9, 10, 11]

VARIANTS = {
    # name: tp, pp, vpp, 16-bit type (None: fp32), names (te: Transformer Engine's), distributed
    # optimizer, extra state kind
    "tp1_fp32_local": dict(tp=1, pp=1, vpp=1, half=None, te=False, dist=False, extra=None),
    "tp1_bf16_te": dict(tp=1, pp=1, vpp=1, half=torch.bfloat16, te=True, dist=False,
                        extra="bytesio"),
    "tp2_pp2_vpp2_bf16_te_distopt": dict(tp=2, pp=2, vpp=2, half=torch.bfloat16, te=True,
                                         dist=True, extra="tensor", dp=2, bucket=3000),
    "tp2_fp32_local": dict(tp=2, pp=1, vpp=1, half=None, te=False, dist=False, extra=None),
    # fp16: Megatron's DynamicGradScaler state in the optimizer entry
    "tp1_fp16_local": dict(tp=1, pp=1, vpp=1, half=torch.float16, te=False, dist=False,
                           extra=None),
}


# ---- Megatron's classes, as pickle names them ----------------------------------------------------
def _module(path):
    parts = path.split(".")
    for i in range(1, len(parts) + 1):
        name = ".".join(parts[:i])
        if name not in sys.modules:
            sys.modules[name] = types.ModuleType(name)
            if i > 1:
                setattr(sys.modules[".".join(parts[:i - 1])], parts[i - 1], sys.modules[name])
    return sys.modules[path]


def _register(cls, module):
    cls.__module__ = module
    setattr(_module(module), cls.__name__, cls)
    return cls


AttnBackend = _register(enum.Enum("AttnBackend", [("flash", 1), ("fused", 2), ("unfused", 3),
                                                  ("local", 4), ("auto", 5)]),
                        "megatron.core.transformer.enums")


class RerunMode(str, enum.Enum):
    DISABLED = "disabled"
    VALIDATE_RESULTS = "validate_results"


class RerunState(enum.Enum):
    NOT_RUNNING_YET = 0
    WILL_RERUN_FROM_CHECKPOINT = 1


_register(RerunMode, "megatron.core.rerun_state_machine")
_register(RerunState, "megatron.core.rerun_state_machine")


# ---- the full model: Megatron-Core GPT names, global layer numbers --------------------------------
def split_of(name):
    if name in ("embedding.word_embeddings.weight", "output_layer.weight"):
        return "rows"
    for suffix, split in LAYER:
        if name.endswith(suffix):
            return split
    return None


def full_names():
    names = ["embedding.word_embeddings.weight", "embedding.position_embeddings.weight"]
    for i in range(L):
        names += ["decoder.layers.%d.%s" % (i, s) for s, _ in LAYER]
    return names + ["decoder.final_layernorm.weight", "decoder.final_layernorm.bias"]


def shape_of(name):
    if name == "embedding.word_embeddings.weight":
        return (VOCAB, H)
    if name == "embedding.position_embeddings.weight":
        return (SEQ, H)
    table = {"linear_proj.weight": (H, H), "linear_qkv.weight": (3 * H, H),
             "linear_qkv.bias": (3 * H,), "linear_fc1.weight": (FFN, H), "linear_fc1.bias": (FFN,),
             "linear_fc2.weight": (H, FFN)}
    for k, v in table.items():
        if name.endswith(k):
            return v
    return (H,)


def reference():
    """Full fp32 master parameters and Adam moments (the true state every variant holds)."""
    g = torch.Generator().manual_seed(20240607)
    rand = lambda shape, std: torch.randn(shape, generator=g, dtype=torch.float32) * std
    ref = {"param": {}, "exp_avg": {}, "exp_avg_sq": {}}
    for name in full_names():
        shape = shape_of(name)
        if "layernorm.weight" in name:
            w = 1.0 + rand(shape, 0.1)
        elif "layernorm.bias" in name:
            w = rand(shape, 0.1)
        else:
            w = rand(shape, 0.02 if name.endswith("weight") else 0.01)
        ref["param"][name] = w
        ref["exp_avg"][name] = rand(shape, 1e-3)
        ref["exp_avg_sq"][name] = rand(shape, 1e-3) ** 2
    return ref


def shard(t, split, tp, r):
    if split == "rows":
        n = t.shape[0] // tp
        return t[r * n:(r + 1) * n].clone()
    if split == "cols":
        n = t.shape[1] // tp
        return t[:, r * n:(r + 1) * n].clone()
    return t.clone()


def chunk_layers(pp, vpp, p, v):
    """Megatron's get_transformer_layer_offset for even stages: the global layers of chunk v on
    pipeline rank p."""
    per_chunk = L // pp // vpp
    first = v * (L // vpp) + p * per_chunk
    return list(range(first, first + per_chunk))


def chunk_params(var, p, v):
    """(key in the chunk's state dict, global name, split, shared) in named_parameters() order."""
    out = []
    pre, post = p == 0 and v == 0, p == var["pp"] - 1 and v == var["vpp"] - 1
    if pre:
        out += [("embedding.word_embeddings.weight", "embedding.word_embeddings.weight", "rows",
                 False),
                ("embedding.position_embeddings.weight", "embedding.position_embeddings.weight",
                 None, False)]
    for j, layer in enumerate(chunk_layers(var["pp"], var["vpp"], p, v)):
        order = TE_ORDER if var["te"] else range(len(LAYER))
        for k in order:
            suffix, split = LAYER[k]
            key = TE_NAME.get(suffix, suffix) if var["te"] else suffix
            out.append(("decoder.layers.%d.%s" % (j, key), "decoder.layers.%d.%s" % (layer, suffix),
                        split, False))
    if post:
        out += [("decoder.final_layernorm.weight", "decoder.final_layernorm.weight", None, False),
                ("decoder.final_layernorm.bias", "decoder.final_layernorm.bias", None, False)]
        if not pre:  # tied embeddings across stages: the last stage's copy (shared)
            out.append(("output_layer.weight", "embedding.word_embeddings.weight", "rows", True))
    return out


def no_wd(key, shape):
    return len(shape) == 1 or key.endswith(".bias")


# ---- the entries of model_optim_rng.pt ------------------------------------------------------------
def extra_state(var):
    if var["extra"] == "bytesio":  # Transformer Engine before 1.x: torch.save(None) in a BytesIO
        b = io.BytesIO()
        torch.save(None, b)
        b.seek(0)
        return b
    if var["extra"] == "tensor":
        return torch.empty(0, dtype=torch.uint8)
    return None


def module_of(key):
    return key.rsplit(".", 1)[0]


def model_dict(var, entries, values):
    """The chunk's module.state_dict(): parameters and each linear's _extra_state after its last
    parameter, with torch's _metadata."""
    sd = collections.OrderedDict()
    dtype = var["half"] or torch.float32
    linears = ("linear_proj", "linear_qkv", "linear_fc1", "linear_fc2")
    for idx, (key, name, split, shared) in enumerate(entries):
        sd[key] = values[idx].to(dtype)
        nxt = entries[idx + 1][0] if idx + 1 < len(entries) else ""
        mod = module_of(key)
        if mod.split(".")[-1] in linears and module_of(nxt) != mod:
            sd[mod + "._extra_state"] = extra_state(var)  # TE modules, or local linears (None)
    if any(k.startswith("decoder.final_layernorm") for k, _, _, _ in entries):
        sd["output_layer._extra_state"] = None  # ColumnParallelLinear in both specs
    sd._metadata = collections.OrderedDict(
        [("", {"version": 1}), ("embedding", {"version": 1}), ("decoder", {"version": 1})])
    return sd


def scheduler():
    return {"max_lr": LR, "lr_warmup_steps": WARMUP_ITERS * GBS, "num_steps": ITERATION * GBS,
            "lr_decay_style": "cosine", "lr_decay_steps": TRAIN_ITERS * GBS, "min_lr": MIN_LR,
            "start_wd": WD, "end_wd": WD, "wd_incr_style": "constant",
            "wd_incr_steps": TRAIN_ITERS * GBS}


def current_lr():
    n, w, d = ITERATION * GBS, WARMUP_ITERS * GBS, TRAIN_ITERS * GBS
    return MIN_LR + 0.5 * (math.cos(math.pi * (n - w) / (d - w)) + 1) * (LR - MIN_LR)


def param_group(var, wd_mult, params, dist):
    g = {"params": params, "is_expert_parallel": False, "default_config": wd_mult == 1.0,
         "wd_mult": wd_mult, "lr_mult": 1.0, "is_decoupled_lr": False, "max_lr": LR,
         "min_lr": MIN_LR, "lr": current_lr()}
    if var["half"]:  # Transformer Engine's FusedAdam keeps the step in the group
        g.update({"bias_correction": True, "betas": (0.9, 0.999), "eps": 1e-8,
                  "weight_decay": WD * wd_mult, "amsgrad": False, "step": ITERATION})
    else:  # torch.optim.AdamW
        g.update({"betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": WD * wd_mult,
                  "amsgrad": False, "foreach": None, "maximize": False, "capturable": False,
                  "differentiable": False, "fused": None})
    if dist:
        del g["params"]
        g["step"] = ITERATION
    return g


def optimizer(var, flat, ref_vals):
    """flat: [(key, name, split, shared)] over the chunks; ref_vals: their local tensors
    {'param': [...], 'exp_avg': [...], 'exp_avg_sq': [...]}."""
    groups = [[i for i, e in enumerate(flat) if not no_wd(e[0], ref_vals["param"][i].shape)],
              [i for i, e in enumerate(flat) if no_wd(e[0], ref_vals["param"][i].shape)]]
    if var["dist"]:
        return {"optimizer": {"param_groups": [param_group(var, 1.0, None, True),
                                               param_group(var, 0.0, None, True)]}}
    state, index, pg = {}, 0, []
    for gi, members in enumerate(groups):
        ids = []
        for i in members:
            s = {}
            if not var["half"]:
                s["step"] = torch.tensor(float(ITERATION))
            s["exp_avg"] = ref_vals["exp_avg"][i]
            s["exp_avg_sq"] = ref_vals["exp_avg_sq"][i]
            state[index] = s
            ids.append(index)
            index += 1
        pg.append(param_group(var, 1.0 if gi == 0 else 0.0, ids, False))
    inner = {"state": state, "param_groups": pg}
    if not var["half"]:
        return inner  # FP32Optimizer.state_dict() is the inner optimizer's
    out = {"optimizer": inner}
    if var["half"] == torch.float16:  # DynamicGradScaler.state_dict()
        out["grad_scaler"] = {"scale": torch.tensor(65536.0), "growth_tracker": 3,
                              "hysteresis_tracker": 2}
    out["fp32_from_fp16_params"] = [[ref_vals["param"][i] for i in m] for m in groups]
    return out


def rng_state():
    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)
    gen = lambda: torch.randint(0, 255, (16,), dtype=torch.uint8)
    return [{"random_rng_state": random.getstate(), "np_rng_state": np.random.get_state(),
             "torch_rng_state": torch.get_rng_state(), "cuda_rng_state": gen(),
             "rng_tracker_states": {"model-parallel-rng": gen(), "data-parallel-rng": gen(),
                                    "expert-parallel-rng": gen()}}]


def namespace(var):
    dp = var.get("dp", 1)
    a = dict(
        num_layers=L, hidden_size=H, ffn_hidden_size=FFN, num_attention_heads=HEADS,
        kv_channels=H // HEADS, group_query_attention=False, num_query_groups=HEADS,
        seq_length=SEQ, max_position_embeddings=SEQ, position_embedding_type="learned_absolute",
        add_position_embedding=True, rotary_base=10000, rotary_percent=1.0,
        make_vocab_size_divisible_by=DIVISIBLE, vocab_size=VOCAB, padded_vocab_size=VOCAB,
        normalization="LayerNorm", norm_epsilon=1e-5, apply_layernorm_1p=False,
        add_bias_linear=True, add_qkv_bias=True, swiglu=False, squared_relu=False,
        untie_embeddings_and_output_weights=False, hidden_dropout=0.1, attention_dropout=0.1,
        transformer_impl="transformer_engine" if var["te"] else "local",
        attention_backend=AttnBackend.auto, spec=None, num_experts=None,
        tensor_model_parallel_size=var["tp"], pipeline_model_parallel_size=var["pp"],
        virtual_pipeline_model_parallel_size=var["vpp"] if var["vpp"] > 1 else None,
        num_layers_per_virtual_pipeline_stage=None,
        num_virtual_stages_per_pipeline_rank=var["vpp"] if var["vpp"] > 1 else None,
        decoder_first_pipeline_num_layers=None, decoder_last_pipeline_num_layers=None,
        context_parallel_size=1, expert_model_parallel_size=1, sequence_parallel=False,
        world_size=var["tp"] * var["pp"] * dp, data_parallel_size=dp, rank=0,
        use_distributed_optimizer=var["dist"], overlap_grad_reduce=var["dist"],
        overlap_param_gather=False, ddp_bucket_size=var.get("bucket"), ddp_num_buckets=None,
        micro_batch_size=MBS, global_batch_size=GBS, train_iters=TRAIN_ITERS,
        train_samples=None, optimizer="adam", adam_beta1=0.9, adam_beta2=0.999, adam_eps=1e-8,
        weight_decay=WD, start_weight_decay=WD, end_weight_decay=WD,
        weight_decay_incr_style="constant", clip_grad=1.0, lr=LR, min_lr=MIN_LR,
        lr_decay_style="cosine", lr_decay_iters=None, lr_warmup_iters=WARMUP_ITERS,
        lr_warmup_init=0.0, lr_warmup_fraction=None, fp16=var["half"] == torch.float16,
        bf16=var["half"] == torch.bfloat16, params_dtype=var["half"] or torch.float32,
        main_grads_dtype=torch.float32, main_params_dtype=torch.float32,
        exp_avg_dtype=torch.float32, exp_avg_sq_dtype=torch.float32,
        accumulate_allreduce_grads_in_fp32=var["half"] == torch.bfloat16, loss_scale=None,
        initial_loss_scale=4294967296, seed=SEED, init_method_std=0.02,
        mock_data=True, tokenizer_type="GPT2BPETokenizer", data_path=None, split=None,
        save=None, load=None, save_interval=5, ckpt_format="torch", use_dist_ckpt=False,
        eval_interval=EVAL_INTERVAL, eval_iters=EVAL_ITERS, log_interval=1,
        rerun_mode="disabled", recompute_granularity=None, recompute_modules=["core_attn"],
        cp_comm_type=["p2p"], consumed_train_samples=ITERATION * GBS, skipped_train_samples=0,
        consumed_valid_samples=(ITERATION // EVAL_INTERVAL) * EVAL_ITERS * GBS,
        data_parallel_random_init=False, iteration=ITERATION, timing_log_level=0,
        padded_vocab_size_note=float("inf"), split_ratio=(0.969, 0.03, 0.001),
        exit_signal=signal.SIGTERM)
    return argparse.Namespace(**a)


# ---- the distributed optimizer's buffers (distrib_optim.pt) ---------------------------------------
def buffer_layout(numels, shared, bucket_size, dp):
    """Megatron's per-buffer layout over parameters in named_parameters() order: returns each
    parameter's start in the world tensors (bucket-end padding removed) and the unpadded bucket
    sizes."""
    pad = lambda x, m: (x + m - 1) // m * m
    end_div = math.lcm(dp, 128)
    starts, unpadded = {}, []
    start = bucket_start = 0
    in_bucket = []
    where = {}

    def close(param_end):
        nonlocal bucket_start
        unpadded.append(param_end - bucket_start)
        for k in in_bucket:
            where[k] = (len(unpadded) - 1, starts[k] - bucket_start)
        in_bucket.clear()
        bucket_start = pad(param_end, end_div)
        return bucket_start

    for k in reversed(range(len(numels))):
        start = pad(start, 64)
        if shared[k] and in_bucket:
            start = close(start)
        starts[k] = start
        end = start + numels[k]
        in_bucket.append(k)
        if (bucket_size and end - bucket_start >= bucket_size) or shared[k]:
            start = close(end)
        else:
            start = end
    if in_bucket:
        close(end)
    offset = [sum(unpadded[:b]) for b in range(len(unpadded))]
    return {k: offset[b] + o for k, (b, o) in where.items()}, unpadded


def distrib_optim(var, p, per_chunk):
    """per_chunk: [(entries, values)] for this pipeline rank's chunks."""
    out = {"buckets_coalesced": True}
    key = (var["half"] or torch.float32, torch.float32)
    for v, (entries, vals) in enumerate(per_chunk):
        numels = [t.numel() for t in vals["param"]]
        shared = [e[3] or (e[1] == "embedding.word_embeddings.weight" and var["pp"] > 1)
                  for e in entries]
        bucket = var["bucket"] if (v == 0 and p == 0 and var["dist"]) else None
        pos, unpadded = buffer_layout(numels, shared, bucket, var["dp"])
        total = sum(unpadded)
        world = {}
        for k in ("param", "exp_avg", "exp_avg_sq"):
            w = torch.zeros(total, dtype=torch.float32)
            for i, t in enumerate(vals[k]):
                w[pos[i]:pos[i] + t.numel()] = t.reshape(-1)
            world[k] = w
        world["numel_unpadded"] = total
        out[v] = {key: world}
    return out


# ---- writing ----------------------------------------------------------------------------------------
def save(obj, path):
    """torch.save as on a GPU: storages recorded as saved from cuda:0."""
    real = torch.serialization.location_tag
    torch.serialization.location_tag = lambda storage: "cuda:0"
    try:
        torch.save(obj, path)
    finally:
        torch.serialization.location_tag = real


def write_variant(out, name, var, ref):
    var = dict(var)
    var.setdefault("dp", 1)
    it_dir = os.path.join(out, name, "iter_%07d" % ITERATION)
    for p in range(var["pp"]):
        for r in range(var["tp"]):
            per_chunk = []
            for v in range(var["vpp"]):
                entries = chunk_params(var, p, v)
                vals = {k: [shard(ref[k][e[1]], e[2], var["tp"], r) for e in entries]
                        for k in ("param", "exp_avg", "exp_avg_sq")}
                per_chunk.append((entries, vals))
            sd = {"args": namespace(var), "checkpoint_version": 3.0, "iteration": ITERATION}
            for v, (entries, vals) in enumerate(per_chunk):
                sd["model%d" % v if var["vpp"] > 1 else "model"] = model_dict(var, entries,
                                                                              vals["param"])
            flat = [e for entries, _ in per_chunk for e in entries]
            flat_vals = {k: [t for _, vals in per_chunk for t in vals[k]]
                         for k in ("param", "exp_avg", "exp_avg_sq")}
            sd["optimizer"] = optimizer(var, flat, flat_vals)
            sd["opt_param_scheduler"] = scheduler()
            if var["half"]:  # older Megatron saved the rerun machine's state in torch files too
                sd["rerun_state_machine"] = {"mode": RerunMode.DISABLED,
                                             "state": RerunState.NOT_RUNNING_YET,
                                             "rerun_requested": False,
                                             "data_iterator_checkpoints": None}
            sd["rng_state"] = rng_state()
            sd["num_floating_point_operations_so_far"] = 1.5e12
            rank_dir = os.path.join(it_dir, "mp_rank_%02d" % r if var["pp"] == 1
                                    else "mp_rank_%02d_%03d" % (r, p))
            os.makedirs(rank_dir, exist_ok=True)
            save(sd, os.path.join(rank_dir, "model_optim_rng.pt"))
            if var["dist"]:
                save(distrib_optim(var, p, per_chunk), os.path.join(rank_dir, "distrib_optim.pt"))
    with open(os.path.join(out, name, "latest_checkpointed_iteration.txt"), "w") as f:
        f.write(str(ITERATION))


def cmd_write(out):
    ref = reference()
    os.makedirs(out, exist_ok=True)
    torch.save(ref, os.path.join(out, "reference.pt"))
    for name, var in VARIANTS.items():
        write_variant(out, name, var, ref)


# ---- checks -------------------------------------------------------------------------------------------
def load(path):
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except TypeError:  # torch < 1.13
        return torch.load(path, map_location="cpu")


def other_name(key):
    """A layer key in the other spec's names (local <-> Transformer Engine)."""
    m = re.match(r"(decoder\.layers\.\d+\.)(.*)$", key)
    if not m:
        return key
    inv = {b: a for a, b in TE_NAME.items()}
    return m.group(1) + TE_NAME.get(m.group(2), inv.get(m.group(2), m.group(2)))


def cmd_check_saved(d, name, ref_path):
    """megatron-c's save of the loaded variant (in the variant's parallel layout, with the names
    of megatron-c's --transformer-impl): every parameter equals the reference's fp32 master
    value bit for bit, and so do the Adam moments (found through the saved file's own
    parameter order) and the step; iteration, consumed samples and the scheduler carry over."""
    var = dict(VARIANTS[name])
    ref = load(ref_path)
    fails = []
    it_dir = os.path.join(d, "iter_%07d" % ITERATION)
    for p in range(var["pp"]):
        for r in range(var["tp"]):
            path = os.path.join(it_dir, "mp_rank_%02d" % r if var["pp"] == 1
                                else "mp_rank_%02d_%03d" % (r, p))
            sd = load(os.path.join(path, "model_optim_rng.pt"))
            if sd["iteration"] != ITERATION:
                fails.append("%s: iteration %s" % (path, sd["iteration"]))
            a = sd["args"]
            if (a.consumed_train_samples, a.consumed_valid_samples) != (ITERATION * GBS, 16):
                fails.append("%s: consumed samples %s %s" % (path, a.consumed_train_samples,
                                                             a.consumed_valid_samples))
            if sd["opt_param_scheduler"]["num_steps"] != ITERATION * GBS:
                fails.append("%s: scheduler num_steps" % path)
            saved = []  # (key, global name, split, tensor) in the saved file's order
            for v in range(var["vpp"]):
                lookup = {}
                for key, gname, split, shared in chunk_params(var, p, v):
                    lookup[key] = lookup[other_name(key)] = (gname, split)
                m = sd["model%d" % v if var["vpp"] > 1 else "model"]
                for key, t in m.items():
                    if key.endswith("._extra_state"):
                        continue
                    if key not in lookup:
                        fails.append("%s: unexpected %s" % (path, key))
                        continue
                    gname, split = lookup.pop(key)
                    lookup.pop(other_name(key), None)
                    want = shard(ref["param"][gname], split, var["tp"], r)
                    if t.dtype != torch.float32 or not torch.equal(t, want):
                        fails.append("%s %s: model value" % (path, key))
                    saved.append((key, gname, split, t))
                if lookup:
                    fails.append("%s: missing %s" % (path, sorted(lookup)[:2]))
            opt = sd["optimizer"]
            if not var["dist"]:
                members = [[e for e in saved if not no_wd(e[0], e[3].shape)],
                           [e for e in saved if no_wd(e[0], e[3].shape)]]
                for g, mem in zip(opt["param_groups"], members):
                    if len(g["params"]) != len(mem):
                        fails.append("%s: group sizes" % path)
                        continue
                    for idx, (key, gname, split, _) in zip(g["params"], mem):
                        s = opt["state"][idx]
                        for k in ("exp_avg", "exp_avg_sq"):
                            if not torch.equal(s[k], shard(ref[k][gname], split, var["tp"], r)):
                                fails.append("%s %s: %s" % (path, key, k))
                        if float(s["step"]) != ITERATION:
                            fails.append("%s: step" % path)
            else:
                if any(g["step"] != ITERATION for g in opt["optimizer"]["param_groups"]):
                    fails.append("%s: step" % path)
                dist = load(os.path.join(path, "distrib_optim.pt"))
                for k in ("param", "exp_avg", "exp_avg_sq"):
                    have = want = 0.0
                    for v in range(var["vpp"]):
                        (_, world), = dist[v].items()
                        have += float((world[k].double() ** 2).sum())
                        for key, gname, split, shared in chunk_params(var, p, v):
                            want += float((shard(ref[k][gname], split, var["tp"], r).double()
                                           ** 2).sum())
                    if abs(have - want) > 1e-9 * max(want, 1e-30):
                        fails.append("%s: distrib_optim.pt %s %g vs %g" % (path, k, have, want))
    if fails:
        print("; ".join(fails[:6]))
        sys.exit(1)


def cmd_eval_loss(ref_path, tokens_path, which):
    """The token-weighted mean loss of the samples (inspect-data ids lines) with the reference
    weights ('master') or those weights rounded to bf16 ('bf16'), in float64, no dropout."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gpt_ref
    ref = load(ref_path)
    P = {}
    for k, t in ref["param"].items():
        if which == "bf16":
            t = t.to(torch.bfloat16).to(torch.float32)
        P[k] = t.to(torch.float64)
    cfg = dict(num_layers=L, num_attention_heads=HEADS, kv_channels=H // HEADS,
               norm_epsilon=1e-5, add_bias_linear=True, untie_embeddings_and_output_weights=False)
    rows = []
    for line in open(tokens_path):
        if line.startswith("#") or not line.strip():
            continue
        rows.append([int(x) for x in line.split("\t")[1].split()])
    text = torch.tensor(rows, dtype=torch.int64)
    total, count = 0.0, 0
    for b in range(0, len(rows), MBS):
        tok, lab = text[b:b + MBS, :-1], text[b:b + MBS, 1:]
        with torch.no_grad():
            loss = gpt_ref.token_losses(gpt_ref.gpt_forward(P, cfg, tok), lab)
        total += float(loss.sum())
        count += loss.numel()
    print("%.9e" % (total / count))


def cmd_tamper(d, kind):
    """Foreign or broken content megatron-c must refuse with one line: in the checkpoint tree d
    (a copy of a variant), rank 0's files get one change."""
    rank = os.path.join(d, "iter_%07d" % ITERATION,
                        sorted(x for x in os.listdir(os.path.join(d, "iter_%07d" % ITERATION)))[0])
    path = os.path.join(rank, "model_optim_rng.pt")
    sd = load(path)
    m = sd["model0"] if "model0" in sd else sd["model"]
    if kind == "qk-layernorm":  # a tensor this model does not have (saved without --qk-layernorm)
        m["decoder.layers.0.self_attention.q_layernorm.weight"] = torch.ones(H // HEADS)
    elif kind == "version2":  # before Megatron-Core's layout
        sd["checkpoint_version"] = 2.0
    elif kind == "decoupled-lr":  # --decoupled-lr adds parameter groups
        groups = (sd["optimizer"].get("optimizer") or sd["optimizer"])["param_groups"]
        groups[0]["lr_mult"] = 0.5
    elif kind == "distopt-numel":
        dist = load(os.path.join(rank, "distrib_optim.pt"))
        (_, world), = dist[0].items()
        world["numel_unpadded"] += 64
        save(dist, os.path.join(rank, "distrib_optim.pt"))
    elif kind == "masters":  # fp32_from_fp16_params that do not match the groups
        sd["optimizer"]["fp32_from_fp16_params"][1].pop()
    elif kind == "moe":  # a model megatron-c does not have (--num-experts)
        sd["args"].num_experts = 8
    else:
        sys.exit("unknown tamper kind " + kind)
    save(sd, path)


def main(argv):
    if len(argv) >= 2 and argv[0] == "write":
        cmd_write(argv[1])
    elif len(argv) == 3 and argv[0] == "tamper":
        cmd_tamper(argv[1], argv[2])
    elif len(argv) == 4 and argv[0] == "check-saved":
        cmd_check_saved(argv[1], argv[2], argv[3])
    elif len(argv) == 4 and argv[0] == "eval-loss":
        cmd_eval_loss(argv[1], argv[2], argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
