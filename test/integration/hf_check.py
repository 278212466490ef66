"""Checks of export-hf's files for test/integration/test_hf.sh, independent of megatron-c's C
mapping (the rows of Megatron's fused tensors are taken apart here again, with numpy).

  hf_check.py tensors HFDIR DUMP.json   every tensor of HFDIR, opened by the safetensors package,
                                        equals the Megatron parameter of the tp1 pp1 checkpoint
                                        file DUMP.json (test/tools/ckpt_tool dump) it comes from;
                                        each file's header pads the data to 8 bytes, the index
                                        names every tensor of the shards and their total size
  hf_check.py logits HFDIR LOGITS TOKEN...
                                        transformers' logits of the model on the tokens equal
                                        LOGITS (test/tools/hf_logits: megatron-c's) to 1e-4

  hf_check.py make gpt2|llama|mixtral|qwen3_moe DIR
                                      a tiny random model saved by transformers' save_pretrained
  hf_check.py same DIR1 DIR2          the two directories hold the same tensors (names, dtypes,
                                      values), whoever wrote the files

Prints one line; exit 0 when the check holds, 1 when not."""
import json
import os
import struct
import sys

import numpy as np


def files_of(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    if not os.path.exists(idx):
        return ["model.safetensors"], None
    with open(idx) as f:
        index = json.load(f)
    return sorted(set(index["weight_map"].values())), index


def load_hf(d):
    from safetensors.numpy import load_file

    names, index = files_of(d)
    out, total = {}, 0
    for n in names:
        path = os.path.join(d, n)
        with open(path, "rb") as f:
            (hlen,) = struct.unpack("<Q", f.read(8))
        assert hlen % 8 == 0, f"{n}: header length {hlen} is not a multiple of 8"
        t = load_file(path)
        for k, v in t.items():
            assert k not in out, f"{k} in two files"
            if index is not None:
                assert index["weight_map"][k] == n, f"index puts {k} in {index['weight_map'][k]}"
            out[k] = v
            total += v.nbytes
    if index is not None:
        assert set(index["weight_map"]) == set(out), "the index and the shards name different tensors"
        assert index["metadata"]["total_size"] == total, "the index's total_size is wrong"
    return out


def tensor(j):
    a = np.array(j["values"], dtype=np.float64).astype(np.float32)
    return a.reshape(j["shape"])


# Transformer Engine's names of the LayerNorms fused into the linear that follows: the local spec's
TE = {"self_attention.linear_qkv.layer_norm_": "input_layernorm.", "mlp.linear_fc1.layer_norm_": "pre_mlp_layernorm."}


def local_name(k):
    for te, local in TE.items():
        if te in k:
            return k.replace(te, local)
    return k


def megatron_params(dump):
    with open(dump) as f:
        sd = dict(json.load(f)["dict"])
    return {local_name(k): tensor(v) for k, v in sd["model"]["dict"] if isinstance(v, dict) and "tensor" in v}


def split_qkv(w, heads, groups):
    """Megatron's linear_qkv rows, per group [its queries, key, value], as (q, k, v)."""
    d = w.shape[0] // (heads + 2 * groups)
    per = heads // groups
    g = w.reshape((groups, per + 2, d) + w.shape[1:])
    q = g[:, :per].reshape((heads * d,) + w.shape[1:])
    return q, g[:, per].reshape((groups * d,) + w.shape[1:]), g[:, per + 1].reshape((groups * d,) + w.shape[1:])


def glu(e, prefix, names, fc1, fc2):
    """A SwiGLU MLP's HF tensors (gate, up, down) from Megatron's linear_fc1 [gate; up] and fc2."""
    F = fc1.shape[0] // 2
    e[prefix + names[0] + ".weight"], e[prefix + names[1] + ".weight"] = fc1[:F], fc1[F:]
    e[prefix + names[2] + ".weight"] = fc2


def moe(e, cfg, h, p):
    """An MoE layer's router and experts: Mixtral's block_sparse_moe (w1 gate, w3 up, w2 down) or
    Qwen3's mlp (gate_proj, up_proj, down_proj)."""
    mixtral = cfg["model_type"] == "mixtral"
    base = h + ("block_sparse_moe." if mixtral else "mlp.")
    e[base + "gate.weight"] = p("mlp.router.weight")
    n = cfg["num_local_experts"] if "num_local_experts" in cfg else cfg["num_experts"]
    for j in range(n):
        x = f"mlp.experts.local_experts.{j}."
        names = ("w1", "w3", "w2") if mixtral else ("gate_proj", "up_proj", "down_proj")
        glu(e, f"{base}experts.{j}.", names, p(x + "linear_fc1.weight"), p(x + "linear_fc2.weight"))


def expected(cfg, m):
    """The HF tensors, from Megatron's parameters m."""
    gpt2 = cfg["model_type"] == "gpt2"
    V = cfg["vocab_size"]
    e = {}
    L = cfg["n_layer"] if gpt2 else cfg["num_hidden_layers"]
    heads = cfg["n_head"] if gpt2 else cfg["num_attention_heads"]
    groups = heads if gpt2 else cfg["num_key_value_heads"]
    emb = m["embedding.word_embeddings.weight"][:V]
    if gpt2:
        e["transformer.wte.weight"] = emb
        e["transformer.wpe.weight"] = m["embedding.position_embeddings.weight"]
        e["transformer.ln_f.weight"] = m["decoder.final_layernorm.weight"]
        e["transformer.ln_f.bias"] = m["decoder.final_layernorm.bias"]
    else:
        e["model.embed_tokens.weight"] = emb
        e["model.norm.weight"] = m["decoder.final_layernorm.weight"]
    if not cfg["tie_word_embeddings"]:
        e["lm_head.weight"] = m["output_layer.weight"][:V]
    for i in range(L):
        p = lambda s: m[f"decoder.layers.{i}.{s}"]
        if gpt2:
            h = f"transformer.h.{i}."
            e[h + "ln_1.weight"], e[h + "ln_1.bias"] = p("input_layernorm.weight"), p("input_layernorm.bias")
            e[h + "ln_2.weight"], e[h + "ln_2.bias"] = p("pre_mlp_layernorm.weight"), p("pre_mlp_layernorm.bias")
            e[h + "attn.c_attn.weight"] = np.concatenate(split_qkv(p("self_attention.linear_qkv.weight"), heads, groups)).T
            e[h + "attn.c_attn.bias"] = np.concatenate(split_qkv(p("self_attention.linear_qkv.bias"), heads, groups))
            e[h + "attn.c_proj.weight"] = p("self_attention.linear_proj.weight").T
            e[h + "attn.c_proj.bias"] = p("self_attention.linear_proj.bias")
            e[h + "mlp.c_fc.weight"] = p("mlp.linear_fc1.weight").T
            e[h + "mlp.c_fc.bias"] = p("mlp.linear_fc1.bias")
            e[h + "mlp.c_proj.weight"] = p("mlp.linear_fc2.weight").T
            e[h + "mlp.c_proj.bias"] = p("mlp.linear_fc2.bias")
        else:
            h = f"model.layers.{i}."
            e[h + "input_layernorm.weight"] = p("input_layernorm.weight")
            e[h + "post_attention_layernorm.weight"] = p("pre_mlp_layernorm.weight")
            q, k, v = split_qkv(p("self_attention.linear_qkv.weight"), heads, groups)
            e[h + "self_attn.q_proj.weight"], e[h + "self_attn.k_proj.weight"], e[h + "self_attn.v_proj.weight"] = q, k, v
            e[h + "self_attn.o_proj.weight"] = p("self_attention.linear_proj.weight")
            if f"decoder.layers.{i}.mlp.router.weight" in m:
                moe(e, cfg, h, p)
            else:
                glu(e, h + "mlp.", ("gate_proj", "up_proj", "down_proj"), p("mlp.linear_fc1.weight"), p("mlp.linear_fc2.weight"))
            if cfg["model_type"] == "qwen3_moe":
                e[h + "self_attn.q_norm.weight"] = p("self_attention.q_layernorm.weight")
                e[h + "self_attn.k_norm.weight"] = p("self_attention.k_layernorm.weight")
            if cfg.get("attention_bias"):
                q, k, v = split_qkv(p("self_attention.linear_qkv.bias"), heads, groups)
                e[h + "self_attn.q_proj.bias"], e[h + "self_attn.k_proj.bias"], e[h + "self_attn.v_proj.bias"] = q, k, v
                e[h + "self_attn.o_proj.bias"] = p("self_attention.linear_proj.bias")
                fb = p("mlp.linear_fc1.bias")
                e[h + "mlp.gate_proj.bias"], e[h + "mlp.up_proj.bias"] = fb[: fb.shape[0] // 2], fb[fb.shape[0] // 2 :]
                e[h + "mlp.down_proj.bias"] = p("mlp.linear_fc2.bias")
    return e


def check_tensors(d, dump):
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    got, want = load_hf(d), expected(cfg, megatron_params(dump))
    if set(got) != set(want):
        return f"names differ: extra {sorted(set(got) - set(want))[:3]}, missing {sorted(set(want) - set(got))[:3]}"
    for k, w in want.items():
        g = got[k]
        if g.shape != w.shape or not np.array_equal(g.astype(np.float32), w):
            return f"{k}: differs (shape {g.shape} vs {w.shape})"
    return None, len(got)


def check_logits(d, path, tokens):
    import torch
    from transformers import AutoModelForCausalLM

    if not torch.cuda.is_available():
        # build/venv-torch2's torch runs on stand-ins for the CUDA libraries (no GPU), which
        # transformers' tracing probe would call into
        torch.cuda.is_current_stream_capturing = lambda: False
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32)
    model.eval()
    ids = torch.tensor([tokens])
    with torch.no_grad():
        out = model(ids, attention_mask=torch.ones_like(ids)).logits[0].numpy()
    mc = np.fromfile(path, dtype=np.float32).reshape(out.shape)
    diff = float(np.abs(out - mc).max())
    return diff, type(model).__name__


def make(kind, d):
    import torch
    import transformers as tf

    torch.manual_seed(0)
    if kind == "gpt2":
        cfg = tf.GPT2Config(vocab_size=100, n_positions=16, n_embd=32, n_layer=2, n_head=4,
                            n_inner=48, activation_function="gelu_new")
        model = tf.GPT2LMHeadModel(cfg)
    else:
        common = dict(vocab_size=100, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16,
                      rope_theta=5000.0, tie_word_embeddings=False)  # not the default: read
        if kind == "mixtral":
            cfg = tf.MixtralConfig(num_local_experts=4, num_experts_per_tok=2, **common)
            model = tf.MixtralForCausalLM(cfg)
        elif kind == "qwen3_moe":  # norm_topk_prob false: Megatron's --moe-router-pre-softmax
            cfg = tf.Qwen3MoeConfig(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=24,
                                    head_dim=16, norm_topk_prob=False, **common)
            model = tf.Qwen3MoeForCausalLM(cfg)
        else:
            model = tf.LlamaForCausalLM(tf.LlamaConfig(**common))
    with torch.no_grad():  # LayerNorm weights away from 1, biases away from 0: every tensor tells
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    model.save_pretrained(d, safe_serialization=True)
    return f"{type(model).__name__} saved by transformers"


def same(d1, d2):
    a, b = load_hf(d1), load_hf(d2)
    if set(a) != set(b):
        return f"names differ: {sorted(set(a) ^ set(b))[:4]}"
    for k in a:
        if a[k].dtype != b[k].dtype or a[k].shape != b[k].shape or not np.array_equal(a[k], b[k]):
            return f"{k} differs"
    return None


def main():
    mode = sys.argv[1]
    try:
        if mode == "make":
            print(make(sys.argv[2], sys.argv[3]))
            return 0
        if mode == "same":
            r = same(sys.argv[2], sys.argv[3])
            print(r or "the same tensors")
            return 1 if r else 0
        if mode == "tensors":
            r = check_tensors(sys.argv[2], sys.argv[3])
            if isinstance(r, str):
                print(r)
                return 1
            print(f"{r[1]} tensors equal the checkpoint's")
            return 0
        diff, cls = check_logits(sys.argv[2], sys.argv[3], [int(t) for t in sys.argv[4:]])
        print(f"{cls}: max |logits difference| {diff:.3g}")
        return 0 if diff <= 1e-4 else 1
    except AssertionError as e:
        print(f"assertion: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
