#!/usr/bin/env bash
# torch_dist checkpoints (PyTorch Distributed Checkpoint) opened by real torch.distributed.checkpoint
# from PyTorch 2.x: test/ref/dcp_check.py, run by build/venv-torch2's python (made by
# scripts/install-deps.sh --torch2; optional, CI does not install it) or $MC_TORCH2_PYTHON.
#  - Megatron-LM's reference checkpoints (shared/data/megatron-ref/torch_dist/{tp1pp1,tp2pp1,
#    tp1pp2}): every key, dtype, global shape and sha256 as the manifest beside them records;
#  - the same files with a plain torch Metadata and 5-item TensorProperties (the form megatron-c
#    writes) read the same; chunks that leave a hole or overlap are refused;
#  - with MC_DCP_CKPT (a megatron-c iteration dir) and MC_DCP_DUMP (test/tools/dcp_dump's lines
#    for it), dcp_check.py's lines equal the dump's.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
: "${MEGATRON_C_SHARED:=$ROOT/../shared}"
PY=${MC_TORCH2_PYTHON:-$ROOT/build/venv-torch2/bin/python}
CHECK=$ROOT/test/ref/dcp_check.py
REF=$MEGATRON_C_SHARED/data/megatron-ref/torch_dist

if ! "$PY" -c 'import sys, torch, torch.distributed.checkpoint
sys.exit(int(torch.__version__.split(".")[0]) < 2)' 2>/dev/null; then
    skip "torch_dist checkpoints in torch.distributed.checkpoint" \
        "no torch 2.x at $PY (scripts/install-deps.sh --torch2 makes build/venv-torch2, or set MC_TORCH2_PYTHON)"
    exit 0
fi
echo "# $("$PY" -c 'import torch; print("torch", torch.__version__)')"

# tail_of FILE / head_of FILE N: a file's last 400 / first N characters on one line (for TAP lines)
tail_of() { tail -c 400 "$1" | tr '\n' ' ' | sed 's/ $//'; }
head_of() { head -c "$2" "$1" | tr '\n' ' ' | sed 's/ $//'; }

# dcp NAME DIR OUT: dcp_check.py on DIR into OUT; one TAP line (exit 0 and its "ok" last line)
dcp() {
    "$PY" "$CHECK" "$2" >"$3" 2>"$3.err"
    local rc=$?
    if [ $rc -eq 0 ] && tail -n 1 "$3" | grep -qE '^ok [0-9]+ tensors [0-9]+ objects$'; then
        ok "$1: dcp_check.py reads it ($(tail -n 1 "$3"))"
    else
        not_ok "$1: dcp_check.py (rc=$rc): $(tail_of "$3.err")"
    fi
}

# manifest_cmp NAME MANIFEST OUT: every tensor's dtype, shape and sha256 and every byte item as the
# manifest records them, and nothing else. The manifest's "sha256" is of the tensor as torch DCP
# assembled it, so it holds for optimizer buckets with padding chunks too (same bytes on disk).
manifest_cmp() {
    local res
    res=$("$PY" - "$2" "$3" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
want = {k: [v["dtype"], ",".join(map(str, v["shape"])), v["sha256"]] for k, v in m["tensors"].items()}
want.update({k: ["object", "-", "-"] for k in m["objects"]})
got = dict((f[0], f[1:]) for f in (l.rstrip("\n").split("\t") for l in open(sys.argv[2])) if len(f) == 4)
bad = [k for k in sorted(set(want) | set(got)) if want.get(k) != got.get(k)]
pad = sum(m["padding_zeroed_sha256"].get(k, v[2]) != v[2] for k, v in want.items())
print(f"{len(want)} keys, {len(bad)} differ{(': ' + ', '.join(bad[:4])) if bad else ''}"
      f"; {pad} with garbage padding")
sys.exit(1 if bad else 0)
EOF
    )
    check "$1: keys, dtypes, shapes, sha256 as the manifest ($res)" test $? -eq 0
}

# rewrite SRC DST MODE: a copy of SRC's files whose .metadata is a plain torch Metadata with
# 5-item TensorProperties; MODE hole drops one chunk of a split tensor, overlap repeats one.
rewrite() {
    mkdir -p "$2" && cp "$1"/* "$1/.metadata" "$2" && chmod -R u+w "$2" &&
        "$PY" - "$2" "$3" "$ROOT/test/ref" <<'EOF'
import pickle, sys
sys.path.insert(0, sys.argv[3])
import dcp_check
from torch.distributed.checkpoint.metadata import Metadata, TensorProperties, TensorStorageMetadata

d, mode = sys.argv[1], sys.argv[2]
md = dcp_check.Reader(d).read_metadata()
full = TensorProperties.__getstate__
TensorProperties.__getstate__ = lambda self: full(self)[:5]  # as torch before 2.15 writes it
sd = md.state_dict_metadata
split = next(k for k in sorted(sd) if isinstance(sd[k], TensorStorageMetadata) and len(sd[k].chunks) > 1)
if mode == "hole":
    sd[split].chunks.pop()
elif mode == "overlap":
    sd[split].chunks.append(sd[split].chunks[0])
with open(f"{d}/.metadata", "wb") as f:
    pickle.dump(Metadata(state_dict_metadata=sd, planner_data=None, storage_data=md.storage_data), f)
EOF
}

for layout in tp1pp1 tp2pp1 tp1pp2; do
    dir=$REF/$layout/iter_0000010
    if [ ! -f "$dir/.metadata" ] || [ ! -f "$REF/$layout.manifest.json" ]; then
        skip "$layout: Megatron reference" "no $dir/.metadata or $layout.manifest.json (set MEGATRON_C_SHARED)"
        continue
    fi
    dcp "$layout" "$dir" "$MC_TMP/$layout.out"
    manifest_cmp "$layout" "$REF/$layout.manifest.json" "$MC_TMP/$layout.out"
done

# megatron-c's form of .metadata (plain Metadata, 5-item TensorProperties), and broken tilings
dir=$REF/tp2pp1/iter_0000010
if [ -f "$dir/.metadata" ] && [ -s "$MC_TMP/tp2pp1.out" ]; then
    if rewrite "$dir" "$MC_TMP/plain" plain 2>"$MC_TMP/plain.err"; then
        dcp "plain Metadata, 5-item TensorProperties" "$MC_TMP/plain" "$MC_TMP/plain.out"
        check "plain Metadata, 5-item TensorProperties: the same lines as Megatron's .metadata" \
            cmp -s "$MC_TMP/plain.out" "$MC_TMP/tp2pp1.out"
    else
        not_ok "rewriting .metadata: $(tail_of "$MC_TMP/plain.err")"
    fi
    for mode in hole overlap; do
        what="a chunk missing" && [ $mode = overlap ] && what="a chunk twice"
        if rewrite "$dir" "$MC_TMP/$mode" "$mode" 2>"$MC_TMP/$mode.err"; then
            "$PY" "$CHECK" "$MC_TMP/$mode" >/dev/null 2>"$MC_TMP/$mode.err"
            rc=$?
            if [ $rc -eq 1 ] && grep -q '^error: .*do not tile' "$MC_TMP/$mode.err"; then
                ok "tiling with $what: refused ($(head_of "$MC_TMP/$mode.err" 200))"
            else
                not_ok "tiling with $what: rc=$rc, stderr: $(head_of "$MC_TMP/$mode.err" 300)"
            fi
        else
            not_ok "rewriting .metadata ($what): $(tail_of "$MC_TMP/$mode.err")"
        fi
    done
fi

# megatron-c's checkpoints: torch's reading of every tensor equals test/tools/dcp_dump's
# (dcp_check.py sorts by key; its closing "ok N tensors M objects" line is left out)
mc_case() { # name iter-dir dump-file
    dcp "megatron-c $1" "$2" "$MC_TMP/mc.out"
    grep -vE '^ok [0-9]+ tensors [0-9]+ objects$' "$MC_TMP/mc.out" | sort >"$MC_TMP/mc.lines"
    grep -vE '^ok [0-9]+ tensors [0-9]+ objects$' "$3" | sort >"$MC_TMP/dump.lines"
    if [ -s "$MC_TMP/mc.lines" ] && diff "$MC_TMP/dump.lines" "$MC_TMP/mc.lines" >"$MC_TMP/dump.diff"; then
        ok "megatron-c $1: torch's $(wc -l <"$MC_TMP/mc.lines") lines equal dcp_dump's"
    else
        not_ok "megatron-c $1: dcp_check.py and dcp_dump differ (< dump, > torch): $(head_of "$MC_TMP/dump.diff" 600)"
    fi
}
DUMP=${MC_BUILD:-}/test/tools/dcp_dump
if [ -n "${MC_DCP_CKPT:-}" ] && [ -n "${MC_DCP_DUMP:-}" ]; then
    mc_case "checkpoint $MC_DCP_CKPT" "$MC_DCP_CKPT" "$MC_DCP_DUMP"
elif [ -n "${MC_DCP_CKPT:-}${MC_DCP_DUMP:-}" ]; then
    not_ok "MC_DCP_CKPT and MC_DCP_DUMP must be set together"
elif [ -x "$MC_BIN" ] && [ -x "$DUMP" ]; then
    TINY=(--device cpu --mock-data --vocab-size 256 --make-vocab-size-divisible-by 64 --num-layers 2
          --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
          --micro-batch-size 2 --global-batch-size 4 --train-iters 2 --lr 1e-3 --eval-iters 0
          --ckpt-format torch_dist --save-interval 2)
    for c in "distopt --use-distributed-optimizer" "distopt-model-space --use-distributed-optimizer --dist-ckpt-optim-fully-reshardable" \
        "bf16 --bf16" "swiglu --swiglu --ffn-hidden-size 64 --untie-embeddings-and-output-weights"; do
        read -r name extra <<<"$c"
        # shellcheck disable=SC2086
        "$MC_BIN" "${TINY[@]}" $extra --save "$MC_TMP/mc-$name" >"$MC_TMP/mc-$name.log" 2>&1 &&
            "$DUMP" "$MC_TMP/mc-$name/iter_0000002" >"$MC_TMP/mc-$name.dump" 2>&1
        if [ $? -eq 0 ]; then mc_case "$name" "$MC_TMP/mc-$name/iter_0000002" "$MC_TMP/mc-$name.dump"
        else not_ok "megatron-c $name: saving or dumping failed: $(tail_of "$MC_TMP/mc-$name.log")"; fi
    done
else
    skip "megatron-c's checkpoints against test/tools/dcp_dump" "no megatron-c or dcp_dump (MC_BIN, MC_BUILD)"
fi
