#!/usr/bin/env python3
"""Compares a torch_dist checkpoint megatron-c wrote with the manifest of Megatron-LM's own
checkpoint of the same model and layout (../shared/data/megatron-ref/torch_dist/*.manifest.json).

    dcp_vs_manifest.py MANIFEST DUMP CHUNKS [DCP_DUMP OURS_DIR MEGATRON_DIR]

DUMP and CHUNKS are `dcp_dump DIR` and `dcp_dump --chunks DIR` of megatron-c's checkpoint.
Checks: the same keys (tensors and objects), and for every tensor the same dtype, global shape,
chunks (offsets and sizes) and sha256 of the whole tensor. Optimizer buckets with padding
between parameters compare with the manifest's padding_zeroed_sha256 (Megatron's padding is
uninitialised memory, megatron-c's zeros); where the manifest has no such hash (the chained
optimizer's buckets of expert-parallel layouts), with DCP_DUMP and both directories given, the
elements of the bucket's parameters (its optimizer_bucket_layout) compare (`dcp_dump --ranges`
of both checkpoints). Prints one line per difference, then
"N tensors, M objects, K differences"; exit 1 when K > 0."""
import json
import subprocess
import sys


def param_ranges(man):
    """{tensor key: "a:b,c:d,..."}: each optimizer bucket tensor's parameters' elements."""
    out, layout = {}, man.get("optimizer_bucket_layout", [])
    ranks = {r["rank"]: r for r in man.get("ranks", [])}
    for entry in layout:
        experts = any(".experts." in p["name"] for p in entry["params"])
        # a rank lists its shard's parameters from the shard's start: (expert) dp rank x numel / size
        same = [e for e in layout if e["key_prefix"] == entry["key_prefix"] and
                any(".experts." in p["name"] for p in e["params"]) == experts]
        shard = entry["numel"] // len(same)
        at = ranks.get(entry["rank"], {}).get("expert_dp_rank" if experts else "dp_rank", 0) * shard
        for state in ("param", "exp_avg", "exp_avg_sq"):
            for chain in ("", "chained_1." if experts else "chained_0."):
                key = "%s%s.%s" % (chain, entry["key_prefix"], state)
                if key in man["tensors"]:
                    out.setdefault(key, set()).update(
                        (at + p["start"], at + p["end"]) for p in entry["params"])
    return {k: ",".join("%d:%d" % r for r in sorted(v)) for k, v in out.items()}


def ranges_sha(tool, d, key, ranges):
    r = subprocess.run([tool, "--ranges", d, key, ranges], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else "(%s)" % r.stderr.strip()


def main():
    man = json.load(open(sys.argv[1]))
    ours, chunks = {}, {}
    for line in open(sys.argv[2]):
        key, dtype, shape, digest = line.rstrip("\n").split("\t")
        ours[key] = (dtype, shape, digest)
    for line in open(sys.argv[3]):
        key, offsets, sizes = line.rstrip("\n").split("\t")
        chunks.setdefault(key, set()).add((offsets, sizes))
    zeroed = man.get("padding_zeroed_sha256", {})
    ranges = param_ranges(man) if len(sys.argv) == 7 else {}
    bad = 0

    def differ(what):
        nonlocal bad
        bad += 1
        print(what)

    for key, t in man["tensors"].items():
        if key not in ours:
            differ("missing tensor %s" % key)
            continue
        dtype, shape, digest = ours[key]
        if dtype != t["dtype"] or shape != ",".join(map(str, t["shape"])):
            differ("%s: %s [%s], Megatron's %s %s" % (key, dtype, shape, t["dtype"], t["shape"]))
        if key not in zeroed and key in ranges and digest != t["sha256"]:
            a, b = (ranges_sha(sys.argv[4], d, key, ranges[key]) for d in sys.argv[5:7])
            if a != b:
                differ("%s: its parameters' elements differ (sha256 %s, Megatron's %s)" % (key, a[:16], b[:16]))
        elif digest != zeroed.get(key, t["sha256"]):
            differ("%s: sha256 %s differs" % (key, digest[:16]))
        want = {(",".join(map(str, c["offsets"])), ",".join(map(str, c["sizes"])))
                for c in t["chunks"]}
        if chunks.get(key, set()) != want:
            differ("%s: chunks %s, Megatron's %s" % (key, sorted(chunks.get(key, set())), sorted(want)))
    for key in man["objects"]:
        if key not in ours or ours[key][0] != "object":
            differ("missing object %s" % key)
    for key in ours:
        if key not in man["tensors"] and key not in man["objects"]:
            differ("extra key %s" % key)
    print("%d tensors, %d objects, %d differences" % (len(man["tensors"]), len(man["objects"]), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
