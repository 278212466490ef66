#!/usr/bin/env bash
# PyTorch checkpoint files (torchfmt/) against PyTorch, driven through test/tools/ckpt_tool:
#  - a file written in C opens with torch.load(weights_only=False): every name, dtype, shape,
#    stride, value, the Namespace, the OrderedDict and its _metadata, a Parameter, shared
#    storages; with zip64 records forced too; the zip layout is torch's (folder named after the
#    file, records 64-byte aligned, CRCs valid for Python's zipfile);
#  - data.pkl written in C equals torch.save's byte for byte for the same object;
#  - a Megatron-like checkpoint written by torch.save (model and Adam state dicts, Namespace
#    with a dtype, RNG states of random/numpy/torch, nested lists, ints > 2^31, views, bytes, a
#    set) loads in C with every value as Python has it, and saved again from C gives the same
#    data.pkl bytes and a file torch loads back, RNG states included;
#  - with MC_TEST_LARGE=1, a 4.3 GB file (a tensor of 4 GiB + 16 bytes, another after 4 GiB)
#    written in C loads in torch and in C (about 9 GB of disk and memory; skipped otherwise).
# ci-sanitize: the pickle and zip reader on files torch.save wrote
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
TOOL=${MC_BUILD:-build/rel}/test/tools/ckpt_tool

if ! "$PY" -c "import torch, numpy" 2>/dev/null; then
    skip "checkpoint files against PyTorch" "python3-torch or python3-numpy is not installed (scripts/install-deps.sh --torch)"
    exit 0
fi
if [ ! -x "$TOOL" ]; then
    not_ok "ckpt_tool is built ($TOOL missing: make tests)"
    exit 0
fi

# The Python side: objects that mirror ckpt_tool's, and canon(), which turns what torch.load
# returns into the JSON that `ckpt_tool dump` prints, reducing other objects as pickle does.
cat >"$MC_TMP/ckref.py" <<'EOF'
import argparse, collections, copyreg, io, json, math, pickle, random, struct, sys, zipfile
import numpy as np
import torch

MAX_VALUES = 1 << 16

def load(path):
    try:
        return torch.load(path, weights_only=False)
    except TypeError:  # torch < 1.13 has no weights_only
        return torch.load(path)

def fl(x):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x

def canon_tensor(t):
    t = t.detach()
    flat = t.reshape(-1)
    vals = flat[:MAX_VALUES].tolist()
    if t.dtype.is_floating_point:
        vals = [fl(v) for v in vals]
    return {"tensor": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
            "stride": list(t.stride()), "offset": t.storage_offset(),
            "requires_grad": t.requires_grad, "parameter": False, "values": vals}

def glob(o, name=None):
    name = name or getattr(o, "__qualname__", None) or o.__name__
    return {"global": "%s.%s" % (pickle.whichmodule(o, name), name)}

def canon(o):
    if o is None or isinstance(o, (bool, int, str)):
        return o
    if isinstance(o, float):
        return fl(o)
    if isinstance(o, bytes):
        return {"bytes": o.hex()}
    if isinstance(o, torch.Tensor):
        c = canon_tensor(o)
        if isinstance(o, torch.nn.Parameter):
            c["parameter"], c["requires_grad"] = True, o.requires_grad
        return c
    if type(o) is tuple:
        return {"tuple": [canon(x) for x in o]}
    if type(o) is list:
        return [canon(x) for x in o]
    if type(o) in (dict, collections.OrderedDict):
        od = type(o) is collections.OrderedDict
        attrs = vars(o) if od and vars(o) else None
        return {"dict": [[canon(k), canon(v)] for k, v in o.items()], "ordered": od,
                "attrs": canon(attrs) if attrs is not None else None}
    if isinstance(o, type) or callable(o) and hasattr(o, "__qualname__"):
        return glob(o)
    rv = o.__reduce_ex__(2)
    if isinstance(rv, str):  # a module attribute such as torch.float32
        return glob(o, rv)
    rv = tuple(rv) + (None,) * (5 - len(rv))
    fn, args, state, li, di = rv
    newobj = getattr(fn, "__name__", "") == "__newobj__"
    if newobj:
        fn, args = args[0], args[1:]
    return {"object": canon(fn), "args": canon(tuple(args)), "newobj": newobj,
            "state": canon(state) if state is not None else None,
            "listitems": canon(list(li)) if li is not None else None,
            "dictitems": {"dict": [[canon(k), canon(v)] for k, v in di], "ordered": False,
                          "attrs": None} if di is not None else None}

def sample():
    """ckpt_tool's sample()."""
    args = argparse.Namespace(num_layers=2, hidden_size=64, lr=1.5e-4, bf16=True, fp16=False,
                              tokenizer_type="GPT2BPETokenizer",
                              data_path=["corpus_text_document", "wiki_text_document"],
                              train_samples=2**40, min_value=-(2**35), load=None,
                              split_ratio=(0.9, 0.1))
    f32 = lambda shape, scale: (torch.arange(math.prod(shape), dtype=torch.float32) * scale - 1).reshape(shape)
    m = collections.OrderedDict()
    m["embedding.word_embeddings.weight"] = f32((4, 3), 0.5)
    m["decoder.layers.0.mlp.linear_fc1.weight"] = torch.tensor([[1, -2], [0.25, 0]], dtype=torch.bfloat16)
    m["decoder.layers.0.mlp.linear_fc1.bias"] = torch.tensor([1, -1], dtype=torch.float16)
    m["scalar"] = torch.tensor(3.5)
    m["ids"] = torch.tensor([1, -2, 2**40])
    m["mask"] = torch.tensor([True, False])
    m["counts"] = torch.tensor([7, -7], dtype=torch.int32)
    m["raw"] = torch.tensor([0, 127, 128, 255], dtype=torch.uint8)
    m["f64"] = torch.tensor([0.1, -1e300, 2.5], dtype=torch.float64)
    m["i16"] = torch.tensor([-300, 300], dtype=torch.int16)
    m["i8"] = torch.tensor([-128, 127], dtype=torch.int8)
    m["empty"] = torch.zeros(0, 3)
    base = torch.arange(10, 16, dtype=torch.float32)
    m["base"] = base
    m["strided_view"] = base[1::2][:2]
    m["param"] = torch.nn.Parameter(f32((5,), 1.0))
    m._metadata = collections.OrderedDict([("", {"version": 1})])
    state = {0: {"step": torch.tensor(5.0), "exp_avg": f32((3,), 0.25)}}
    return {"args": args, "checkpoint_version": 3.0, "iteration": 100, "model": m,
            "optimizer": {"param_groups": [{"lr": 1e-3, "params": (0, 1)}], "state": state},
            "blob": b"\x00\xff\x80abc", "empty_bytes": b"", "unicode": "h\u00e9llo \u2713",
            "flags": (True, False, None), "extremes": (-2**63, 2**63 - 1, -129, 65536, -1),
            "nested": [1, [(), (1, 2, 3, 4)]], "big_list": list(range(1001)),
            "big_dict": {"k%d" % i: i for i in range(1000)}}

def simple():
    """ckpt_tool's simple(): its data.pkl must be torch.save's, byte for byte."""
    w = torch.arange(6, dtype=torch.float32).reshape(2, 3) * 0.5 - 1
    sd = collections.OrderedDict()
    sd["weight"] = w
    sd["bias"] = torch.zeros(2, dtype=torch.bfloat16)
    sd._metadata = collections.OrderedDict()
    sd._metadata[""] = dict(version=1)
    return {"args": argparse.Namespace(hidden_size=1024, lr_decay_style="cosine"),
            "iteration": 300000, "model": sd, "checkpoint_version": 3.0, "neg": -5000000000,
            "tied": w, "view": w.view(-1)[3:],
            "param": torch.nn.Parameter(torch.arange(5, dtype=torch.float32) - 1),
            "bytes": b"\x00\xffb", "one": b"b", "empty": b"", "chars": ["a", "a", "", "\u00e9"],
            "batch_list": list(range(1001)), "batch_dict": {"k%d" % i: i for i in range(1000)},
            "ints": [0, 255, 256, 65535, 65536, -1, 2**31, -2**31 - 1, -2**63, 2**63 - 1, -129]}

def megatron_like():
    """What Megatron's legacy save holds (MEGATRON.md section 9), with torch's own objects."""
    torch.manual_seed(1234); np.random.seed(1234); random.seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(2, 4)).pow(2).sum().backward()
    opt.step()
    big = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    args = argparse.Namespace(num_layers=2, hidden_size=64, params_dtype=torch.bfloat16,
                              data_path=["1.0", "corpus_text_document"], seed=1234,
                              train_iters=2**33, rampup_batch_size=None, lr=1.5e-4,
                              split="969,30,1", use_distributed_optimizer=False)
    return {
        "args": args, "checkpoint_version": 3.0, "iteration": 2**33 + 5,
        "model": model.state_dict(),
        "optimizer": {"optimizer": opt.state_dict(),
                      "grad_scaler": {"scale": torch.tensor([65536.0]), "growth_tracker": 0},
                      "fp32_from_fp16_params": [[p.detach().clone().float() for p in model.parameters()]]},
        "opt_param_scheduler": {"max_lr": 1e-3, "lr_warmup_steps": 10, "num_steps": 160,
                                "lr_decay_style": "cosine", "lr_decay_steps": 1000, "min_lr": 1e-5,
                                "start_wd": 0.1, "end_wd": 0.1, "wd_incr_style": "constant",
                                "wd_incr_steps": 1000},
        "rng_state": [{"random_rng_state": random.getstate(), "np_rng_state": np.random.get_state(),
                       "torch_rng_state": torch.get_rng_state(), "cuda_rng_state": None,
                       "rng_tracker_states": {}}],
        "num_floating_point_operations_so_far": 1.5e15,
        "nested": [1, [2.5, ["deep", [None, True]]], (), (1,), (1, 2, 3, 4)],
        "views": {"base": big, "slice": big[1], "transposed": big.transpose(0, 2), "tied": big},
        "dtypes": {str(d): torch.arange(5).to(d) for d in (torch.float16, torch.bfloat16, torch.float64,
                   torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool)},
        "param": torch.nn.Parameter(torch.ones(2)),
        "bytes": b"\x00\x01\xfe\xff", "set": {1, 2, 3}, "str": "h\u00e9llo \u2713", "neg": -2**40,
        "float": 0.1, "empty": torch.zeros(0, 3), "scalar": torch.tensor(2.5),
    }

def data_pkl(path):
    z = zipfile.ZipFile(path)
    return z.read([n for n in z.namelist() if n.endswith("/data.pkl")][0])

def layout(path):
    """(archive folder, [(name, data offset)]) from the local headers, as torch reads them."""
    raw = open(path, "rb").read()
    z = zipfile.ZipFile(path)
    assert z.testzip() is None, "CRC error in " + str(z.testzip())
    out = []
    for i in z.infolist():
        nlen, xlen = struct.unpack("<HH", raw[i.header_offset + 26:i.header_offset + 30])
        out.append((i.filename, i.header_offset + 30 + nlen + xlen))
    return out[0][0].split("/")[0], out

def same(a, b, where="root"):
    """The first difference between two canon() values, or None."""
    if type(a) != type(b) and not (isinstance(a, (int, float)) and isinstance(b, (int, float))
                                   and not isinstance(a, bool) and not isinstance(b, bool)):
        return "%s: %r != %r" % (where, a, b)
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return "%s: keys %s != %s" % (where, sorted(a), sorted(b))
        for k in a:
            d = same(a[k], b[k], where + "." + str(k))
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return "%s: %d items != %d" % (where, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            d = same(x, y, "%s[%d]" % (where, i))
            if d:
                return d
        return None
    return None if a == b else "%s: %r != %r" % (where, a, b)
EOF

run_py() { # name, python code (ckref imported); the code prints "ok" or a reason
    local name=$1 out
    out=$(cd "$MC_TMP" && PYTHONPATH="$MC_TMP" "$PY" -c "import warnings; warnings.simplefilter('ignore')
from ckref import *
$2" 2>&1)
    if [ "$out" = ok ]; then ok "$name"; else not_ok "$name: $(echo "$out" | tail -c 600)"; fi
}

torch_version=$("$PY" -c "import torch; print(torch.__version__)")
echo "# torch $torch_version"

# ---- (a) written in C, read by torch ----
if "$TOOL" write "$MC_TMP/s.pt" 2>"$MC_TMP/err"; then ok "ckpt_tool writes the sample"; else not_ok "ckpt_tool writes the sample: $(cat "$MC_TMP/err")"; fi
run_py "torch.load opens the C file: names, dtypes, shapes, strides and values" '
d = same(canon(sample()), canon(load("s.pt")))
print(d or "ok")'
run_py "torch.load gives Namespace, OrderedDict with _metadata, Parameter, shared storages" '
o = load("s.pt"); m = o["model"]
assert type(o["args"]) is argparse.Namespace and o["args"].train_samples == 2**40, o["args"]
assert type(m) is collections.OrderedDict and m._metadata == {"": {"version": 1}}, m._metadata
assert type(m["param"]) is torch.nn.Parameter and m["param"].requires_grad
sv = m["strided_view"]
assert sv.storage().data_ptr() == m["base"].storage().data_ptr() and sv.storage_offset() == 1 and sv.stride() == (2,)
assert m["decoder.layers.0.mlp.linear_fc1.weight"].dtype == torch.bfloat16
assert o["optimizer"]["state"][0]["step"].shape == ()
print("ok")'
run_py "the zip is torch's: folder named after the file, 64-byte aligned records, valid CRCs" '
folder, recs = layout("s.pt")
names = [n for n, _ in recs]
assert folder == "s", folder
assert names[:4] == ["s/data.pkl", "s/.format_version", "s/.storage_alignment", "s/byteorder"], names
assert names[-2:] == ["s/version", "s/.data/serialization_id"], names
assert all(off % 64 == 0 for _, off in recs), recs
z = zipfile.ZipFile("s.pt")
assert z.read("s/version") == b"3\n" and z.read("s/byteorder") == b"little"
assert all(n == "s/data/%d" % i for i, n in enumerate(names[4:-2])), names
print("ok")'
if "$TOOL" write "$MC_TMP/s64.pt" --zip64 2>"$MC_TMP/err"; then
    run_py "a C file with zip64 records everywhere opens in torch and zipfile" '
folder, recs = layout("s64.pt")
assert all(off % 64 == 0 for _, off in recs) and folder == "sample"
print(same(canon(sample()), canon(load("s64.pt"))) or "ok")'
else
    not_ok "ckpt_tool writes the zip64 sample: $(cat "$MC_TMP/err")"
fi

# ---- data.pkl byte for byte ----
"$TOOL" simple "$MC_TMP/simple.pt" 2>"$MC_TMP/err" || not_ok "ckpt_tool writes simple: $(cat "$MC_TMP/err")"
run_py "data.pkl written in C equals torch.save's for the same object" '
torch.save(simple(), "simple_torch.pt")
a, b = data_pkl("simple.pt"), data_pkl("simple_torch.pt")
i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
print("ok" if a == b else "differ at byte %d of %d/%d: C %r, torch %r" % (i, len(a), len(b), a[i-20:i+20], b[i-20:i+20]))'

# ---- (b) written by torch.save, read in C ----
run_py "torch.save writes the Megatron-like checkpoint" '
torch.save(megatron_like(), "mega.pt")
print("ok")'
if "$TOOL" dump "$MC_TMP/mega.pt" >"$MC_TMP/mega.json" 2>"$MC_TMP/err"; then
    ok "ckpt_tool loads torch.save's checkpoint"
    run_py "the C reader sees every value of torch.save's checkpoint" '
print(same(canon(megatron_like()), json.load(open("mega.json"))) or "ok")'
else
    not_ok "ckpt_tool loads torch.save's checkpoint: $(cat "$MC_TMP/err")"
fi
if "$TOOL" resave "$MC_TMP/mega.pt" "$MC_TMP/mega2.pt" 2>"$MC_TMP/err"; then
    run_py "saved again from C: the same data.pkl bytes as torch.save's" '
a, b = data_pkl("mega2.pt"), data_pkl("mega.pt")
i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
print("ok" if a == b else "differ at byte %d of %d/%d: C %r, torch %r" % (i, len(a), len(b), a[i-20:i+20], b[i-20:i+20]))'
    run_py "saved again from C: torch loads it, RNG states and optimizer included" '
o, ref = load("mega2.pt"), megatron_like()
d = same(canon(ref), canon(o))
if d: print(d); sys.exit()
rs = o["rng_state"][0]
random.setstate(rs["random_rng_state"]); np.random.set_state(rs["np_rng_state"]); torch.set_rng_state(rs["torch_rng_state"])
x = (random.random(), np.random.rand(), torch.rand(1).item())
random.setstate(ref["rng_state"][0]["random_rng_state"]); np.random.set_state(ref["rng_state"][0]["np_rng_state"]); torch.set_rng_state(ref["rng_state"][0]["torch_rng_state"])
assert x == (random.random(), np.random.rand(), torch.rand(1).item()), x
m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3)); m.load_state_dict(o["model"])
opt = torch.optim.Adam(m.parameters(), lr=1e-3); opt.load_state_dict(o["optimizer"]["optimizer"])
v = o["views"]
assert v["slice"].storage().data_ptr() == v["base"].storage().data_ptr() and v["tied"] is v["base"]
assert o["args"].params_dtype is torch.bfloat16
print("ok")'
else
    not_ok "ckpt_tool saves torch.save's checkpoint again: $(cat "$MC_TMP/err")"
fi

# ---- corrupt files: the C reader names the problem ----
cp "$MC_TMP/s.pt" "$MC_TMP/bad.pt"
off=$(cd "$MC_TMP" && PYTHONPATH="$MC_TMP" "$PY" -c 'from ckref import *; print(dict(layout("bad.pt")[1])["s/data/3"])')
printf '\x7f' | dd of="$MC_TMP/bad.pt" bs=1 seek="$off" conv=notrunc status=none
"$TOOL" dump "$MC_TMP/bad.pt" >/dev/null 2>"$MC_TMP/err"
check "a flipped tensor byte: CRC mismatch naming s/data/3" grep -q "bad.pt: CRC mismatch in s/data/3$" "$MC_TMP/err"
head -c 3000 "$MC_TMP/s.pt" >"$MC_TMP/cut.pt"
"$TOOL" dump "$MC_TMP/cut.pt" >/dev/null 2>"$MC_TMP/err"
check "a truncated file is refused" grep -q "cut.pt: no end-of-central-directory record: not a zip archive, or truncated" "$MC_TMP/err"

# ---- > 4 GiB ----
if [ "${MC_TEST_LARGE:-0}" != 1 ]; then
    skip "a 4.3 GB checkpoint (zip64 sizes and offsets) in torch and C" "set MC_TEST_LARGE=1 (needs ~9 GB of disk and memory)"
else
    if "$TOOL" big "$MC_TMP/big.pt" 2>"$MC_TMP/err"; then
        run_py "a 4.3 GB file written in C opens in torch" '
z = zipfile.ZipFile("big.pt"); i = z.getinfo("big/data/0")
assert i.file_size == 4 * 2**30 + 16 and z.getinfo("big/data/1").header_offset > 2**32
folder, recs = layout("big.pt")
assert all(off % 64 == 0 for _, off in recs), recs
o = load("big.pt")
assert o["zeros"].shape == (4 * 2**30 + 16,) and o["zeros"].dtype == torch.uint8
assert o["after"].tolist() == [1.0, 2.0, 3.0]
assert int(o["zeros"][-16:].sum()) == 0 and int(o["zeros"][::2**20].sum()) == 0
print("ok")'
        "$TOOL" dump "$MC_TMP/big.pt" >"$MC_TMP/big.json" 2>"$MC_TMP/err"
        check "the C reader loads it (CRCs of 4 GiB checked)" grep -q '"after", {"tensor": "float32", "shape": \[3\].*"values": \[1, 2, 3\]' "$MC_TMP/big.json"
    else
        not_ok "ckpt_tool writes a 4.3 GB file: $(cat "$MC_TMP/err")"
    fi
fi
