#!/usr/bin/env python3
"""Compares a torch_dist checkpoint megatron-c wrote with the manifest of Megatron-LM's own
checkpoint of the same model and layout (../shared/data/megatron-ref/torch_dist/*.manifest.json).

    dcp_vs_manifest.py MANIFEST DUMP CHUNKS

DUMP and CHUNKS are `dcp_dump DIR` and `dcp_dump --chunks DIR` of megatron-c's checkpoint.
Checks: the same keys (tensors and objects), and for every tensor the same dtype, global shape,
chunks (offsets and sizes) and sha256 of the whole tensor. Optimizer buckets with padding
between parameters compare with the manifest's padding_zeroed_sha256 (Megatron's padding is
uninitialised memory, megatron-c's zeros). Prints one line per difference, then
"N tensors, M objects, K differences"; exit 1 when K > 0."""
import json
import sys


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
        if digest != zeroed.get(key, t["sha256"]):
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
