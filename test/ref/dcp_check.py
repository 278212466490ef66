#!/usr/bin/env python3
"""Reads a torch_dist checkpoint with PyTorch's own torch.distributed.checkpoint (torch 2.x).

Usage: dcp_check.py CKPT_ITER_DIR      (e.g. SAVE/iter_0000010, the folder holding .metadata)

Loads every tensor key fully (no process group) into a tensor of its global shape and prints,
sorted by key, one line per item:
    key<TAB>dtype<TAB>shape<TAB>sha256     tensors: dtype as torch names it without "torch."
                                           (float32, bfloat16), shape comma-separated, sha256
                                           of the tensor's C-order little-endian bytes
    key<TAB>object<TAB>-<TAB>-             byte items (BytesStorageMetadata)
then checks that each tensor's chunks tile it exactly once and ends with
"ok N tensors M objects", or prints "error: ..." on stderr and exits 1.
Megatron's .metadata names megatron.core...MCoreMetadata (and MCoreSavePlan): these map to
stand-in subclasses of torch's own classes, so Megatron need not be installed.
"""
import dataclasses
import hashlib
import io
import os
import pickle
import sys
import warnings

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.metadata import BytesStorageMetadata, Metadata, TensorStorageMetadata
from torch.distributed.checkpoint.planner import SavePlan


@dataclasses.dataclass
class MCoreMetadata(Metadata):  # stand-in for megatron...strategies.torch.MCoreMetadata
    mcore_data: dict = None


@dataclasses.dataclass(frozen=True)
class MCoreSavePlan(SavePlan):  # stand-in for megatron...strategies.torch.MCoreSavePlan
    mcore_data: dict = None


STAND_INS = {"MCoreMetadata": MCoreMetadata, "MCoreSavePlan": MCoreSavePlan}


class Unpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if module.split(".")[0] == "megatron":
            if name not in STAND_INS:
                raise pickle.UnpicklingError(f"unknown Megatron class {module}.{name} in .metadata")
            return STAND_INS[name]
        return super().find_class(module, name)


class Reader(dcp.FileSystemReader):
    """FileSystemReader whose .metadata unpickling knows the Megatron class names."""

    def read_metadata(self, *args, **kwargs):
        with self.fs.create_stream(self._get_metadata_path(kwargs.get("rank")), "rb") as f:
            md = Unpickler(f).load()
        if getattr(md, "storage_meta", None) is None:
            md.storage_meta = dcp.metadata.StorageMeta()
        md.storage_meta.load_id = self.load_id
        return md


def fail(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(1)


def tiles_once(meta):
    """Each element of the global tensor covered by exactly one chunk."""
    count = torch.zeros(tuple(meta.size), dtype=torch.int32)
    for c in meta.chunks:
        if len(c.offsets) != len(meta.size) or any(o < 0 or o + s > n for o, s, n in zip(c.offsets, c.sizes, meta.size)):
            return False
        count[tuple(slice(o, o + s) for o, s in zip(c.offsets, c.sizes))] += 1
    return bool((count == 1).all())


def main():
    if len(sys.argv) != 2:
        fail("usage: dcp_check.py CKPT_ITER_DIR")
    reader = Reader(sys.argv[1])
    try:
        md = reader.read_metadata()
    except Exception as e:  # noqa: BLE001 (any failure to read is the answer)
        fail(f"{sys.argv[1]}/.metadata: {type(e).__name__}: {e}")

    state = {}
    for key, meta in md.state_dict_metadata.items():
        if isinstance(meta, TensorStorageMetadata):
            if not tiles_once(meta):
                fail(f"{key}: the chunks do not tile the global shape {list(meta.size)} exactly once")
            # NaN where floating, so an element left unread would show in the hash
            t = torch.empty(tuple(meta.size), dtype=meta.properties.dtype)
            state[key] = t.fill_(float("nan")) if t.is_floating_point() else t.zero_()
        elif isinstance(meta, BytesStorageMetadata):
            state[key] = io.BytesIO()  # the planner replaces it with the torch.load'ed object
        else:
            fail(f"{key}: unknown storage metadata {type(meta).__name__}")

    # torch's own DefaultLoadPlanner; without an initialised process group it runs no_dist (and
    # warns that it assumes a single process: it does, that is meant)
    warnings.filterwarnings("ignore", message="torch.distributed is disabled")
    try:
        dcp.load(state, storage_reader=reader)
    except Exception as e:  # noqa: BLE001
        fail(f"torch.distributed.checkpoint.load: {type(e).__name__}: {e}")

    n_t = n_o = 0
    for key in sorted(state):
        meta = md.state_dict_metadata[key]
        if isinstance(meta, BytesStorageMetadata):
            if isinstance(state[key], io.BytesIO):
                fail(f"{key}: byte item not loaded")
            # DCP_CHECK_REPR=1: the object's repr instead of "-" (to compare objects by value)
            shown = repr(state[key]) if os.environ.get("DCP_CHECK_REPR") else "-"
            print(f"{key}\tobject\t-\t{shown}")
            n_o += 1
            continue
        t = state[key]
        if tuple(t.shape) != tuple(meta.size) or t.dtype != meta.properties.dtype:
            fail(f"{key}: loaded {t.dtype} {list(t.shape)}, metadata says {meta.properties.dtype} {list(meta.size)}")
        raw = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()  # native = little endian
        dtype = str(t.dtype).removeprefix("torch.")
        shape = ",".join(str(d) for d in t.shape)
        print(f"{key}\t{dtype}\t{shape}\t{hashlib.sha256(raw).hexdigest()}")
        n_t += 1
    print(f"ok {n_t} tensors {n_o} objects")


if __name__ == "__main__":
    main()
