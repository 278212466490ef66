#!/usr/bin/env bash
# DCP files (torchfmt/dcp.h) against Python and, where it is installed, PyTorch >= 2.3, driven
# through test/tools/dcp_dump:
#  - dcp_dump on Megatron's tp1pp1 reference checkpoint gives the manifest's sha256 for every
#    tensor (embedding.word_embeddings.weight named on its own line);
#  - a checkpoint written in C (dcp_dump --sample) unpickles with Python's pickle, its classes
#    mapped to stand-ins: a plain torch.distributed.checkpoint.metadata.Metadata with exactly the
#    five dataclass fields, 5-item TensorProperties, torch.Size shapes, a storage record per
#    chunk, and every item a zip that Python's zipfile reads (CRCs included) holding the chunk
#    tensor as torch.save writes it, with the values the sample wrote;
#  - with torch >= 2.3 (torch.distributed.checkpoint), torch's own FileSystemReader loads it
#    (skipped otherwise, with the reason).
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
TOOL=${MC_BUILD:-build/rel}/test/tools/dcp_dump
SHARED=${MEGATRON_C_SHARED:-../shared}
REF=$SHARED/data/megatron-ref/torch_dist
if [ ! -x "$TOOL" ]; then
    not_ok "dcp_dump is built ($TOOL missing: make tests)"
    exit 0
fi

if [ -f "$REF/tp1pp1.manifest.json" ]; then
    "$TOOL" "$REF/tp1pp1/iter_0000010" >"$MC_TMP/dump" 2>"$MC_TMP/err"
    want=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["tensors"]["embedding.word_embeddings.weight"]["sha256"])' "$REF/tp1pp1.manifest.json")
    check "dcp_dump tp1pp1: embedding.word_embeddings.weight has the manifest's sha256" \
        grep -qP "^embedding\.word_embeddings\.weight\tfloat32\t128,64\t$want\$" "$MC_TMP/dump"
    check "dcp_dump tp1pp1: every tensor has the manifest's sha256 (padded buckets excepted)" \
        "$PY" - "$REF/tp1pp1.manifest.json" "$MC_TMP/dump" <<'PYEOF'
import json, sys
man = json.load(open(sys.argv[1]))
got = {l.split("\t")[0]: l.rstrip("\n").split("\t") for l in open(sys.argv[2])}
pad = man.get("padding_zeroed_sha256", {})
n = 0
for k, t in man["tensors"].items():
    g = got[k]
    assert g[1] == t["dtype"] and g[2] == ",".join(map(str, t["shape"])), (k, g)
    if k not in pad:
        assert g[3] == t["sha256"], k
        n += 1
for k in man["objects"]:
    assert got[k][1] == "object", k
assert n > 10
PYEOF
else
    skip "dcp_dump on the reference checkpoint" "$REF is absent (set MEGATRON_C_SHARED)"
fi

mkdir -p "$MC_TMP/s"
if ! "$TOOL" --sample "$MC_TMP/s" 2>"$MC_TMP/err"; then
    not_ok "dcp_dump writes the sample: $(cat "$MC_TMP/err")"
    exit 0
fi
check "the sample's .metadata and items read with Python's pickle and zipfile" \
    "$PY" - "$MC_TMP/s" <<'PYEOF'
import collections, io, pickle, struct, sys, zipfile
d = sys.argv[1]

class Stub:
    def __init__(self, *args): self.args = args
    def __setstate__(self, st): self.state = st

class Size(tuple): pass
classes = {}

class U(pickle.Unpickler):
    def find_class(self, mod, name):
        if (mod, name) == ("torch", "Size"): return Size
        if (mod, name) == ("collections", "OrderedDict"): return collections.OrderedDict
        if mod == "torch": return "torch." + name  # dtypes
        return classes.setdefault((mod, name), type(name, (Stub,), {"qual": mod + "." + name}))
    def persistent_load(self, pid): return pid

md = U(open(d + "/.metadata", "rb")).load()
M = "torch.distributed.checkpoint.metadata."
assert md.qual == M + "Metadata", md.qual
assert list(md.state) == ["state_dict_metadata", "planner_data", "storage_data", "storage_meta", "version"]
assert md.state["planner_data"] is None and md.state["version"] == "1.0.0"
sm = md.state["storage_meta"]
assert sm.qual == M + "StorageMeta" and sm.state["checkpoint_id"] == d and len(sm.state["save_id"]) == 36
sdm = md.state["state_dict_metadata"]
assert sorted(sdm) == ["b", "obj/shard_0_1", "v", "w"], list(sdm)
assert sdm["obj/shard_0_1"].qual == M + "BytesStorageMetadata"
want = {"w": ("torch.float32", (4, 6, 5)), "b": ("torch.bfloat16", (8, 4)), "v": ("torch.float32", (10,))}
storage = {}
for idx, info in md.state["storage_data"].items():
    assert idx.qual == M + "MetadataIndex" and idx.state["index"] is None
    assert info.qual == "torch.distributed.checkpoint.filesystem._StorageInfo"
    off = idx.state["offset"]
    storage[(idx.state["fqn"], None if off is None else tuple(off))] = info.state
for k, (dt, shape) in want.items():
    t = sdm[k]
    assert t.qual == M + "TensorStorageMetadata"
    p = t.state["properties"]
    assert p.qual == M + "TensorProperties" and len(p.state) == 5, p.state
    assert p.state[0] == dt and p.state[1].args == ("torch.strided",) and p.state[2] is False
    assert p.state[3].qual == M + "_MEM_FORMAT_ENCODING" and p.state[3].args == (0,) and p.state[4] is False
    assert isinstance(t.state["size"], Size) and tuple(t.state["size"]) == shape
    for c in t.state["chunks"]:
        off, sizes = tuple(c.state["offsets"]), tuple(c.state["sizes"])
        info = storage.pop((k, off))
        raw = open(d + "/" + info["relative_path"], "rb").read()[info["offset"]:info["offset"] + info["length"]]
        assert len(raw) == info["length"]
        z = zipfile.ZipFile(io.BytesIO(raw))
        assert z.testzip() is None
        assert z.namelist()[0] == "archive/data.pkl"
        r = U(io.BytesIO(z.read("archive/data.pkl"))).load()
        assert r.qual == "torch._utils._rebuild_tensor_v2", r.qual
        pid, soff, size, stride = r.args[:4]
        assert pid[0] == "storage" and pid[2] == "0" and soff == 0 and tuple(size) == sizes
        data = z.read("archive/data/0")
        n = 1
        for s in sizes: n *= s
        if dt == "torch.float32":
            vals = struct.unpack("<%df" % n, data)
        else:
            vals = [struct.unpack("<f", b"\0\0" + data[2 * i:2 * i + 2])[0] for i in range(n)]
        assert len(data) == n * (4 if dt == "torch.float32" else 2)
        for i, v in enumerate(vals):  # the global index of element i of the chunk
            g, rem = 0, i
            idx = []
            for s in reversed(sizes): idx.append(rem % s); rem //= s
            idx.reverse()
            for dd in range(len(shape)): g = g * shape[dd] + off[dd] + idx[dd]
            assert v == g * 0.25 - 3, (k, i, v, g)
info = storage.pop(("obj/shard_0_1", None))
raw = open(d + "/" + info["relative_path"], "rb").read()[info["offset"]:info["offset"] + info["length"]]
assert pickle.loads(zipfile.ZipFile(io.BytesIO(raw)).read("archive/data.pkl")) == [{"a": 1}]
assert not storage, storage
PYEOF

if "$PY" -c "import torch.distributed.checkpoint" 2>/dev/null; then
    check "torch's FileSystemReader loads the sample" "$PY" - "$MC_TMP/s" <<'PYEOF'
import sys, torch
import torch.distributed.checkpoint as dcp
sd = {"w": torch.zeros(4, 6, 5), "b": torch.zeros(8, 4, dtype=torch.bfloat16), "v": torch.zeros(10)}
dcp.load(sd, storage_reader=dcp.FileSystemReader(sys.argv[1]), no_dist=True)
ref = torch.arange(4 * 6 * 5, dtype=torch.float32).reshape(4, 6, 5) * 0.25 - 3
assert torch.equal(sd["w"], ref) and torch.equal(sd["v"], torch.arange(10.) * 0.25 - 3)
assert torch.equal(sd["b"].float(), torch.arange(32.).reshape(8, 4) * 0.25 - 3)
PYEOF
else
    skip "torch's FileSystemReader loads the sample" "no torch.distributed.checkpoint in $PY (torch >= 2.3 needed)"
fi
