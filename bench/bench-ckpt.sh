#!/usr/bin/env bash
# Checkpoint benchmark (docs/PERF.md, "Checkpoints"): for a ~1B-parameter GPT on the CPU backend
# (one rank), the time and size of a save, synchronous and with --async-save, the time of a load,
# and the raw write speed of the same number of bytes on the same disk in the same run.
#
#  - save: one training iteration, then a save of iteration 1. Megatron's save-checkpoint timer
#    is the time the training loop waited: the whole save when synchronous; with --async-save
#    the host snapshot (the write runs in a background thread). The write's own duration is the
#    time from the "saving checkpoint" line to the "successfully saved" line: the save is the
#    last thing in the run, so the loop publishes it as soon as the writer is done.
#  - load: --load --skip-train after dropping the files from the page cache
#    (dd iflag=nocache count=0); Megatron's load-checkpoint timer (read, CRC check, copy into
#    the model and optimizer).
#  - raw: dd if=/dev/zero bs=64M conv=fsync of as many bytes as the checkpoint, in the same
#    directory: what the disk takes for the bytes alone (a save also pickles, computes CRC-32s
#    and fsyncs).
# Models: the 1B model, and a 0.54B one for which --async-save's snapshot fits this machine's
# memory (the snapshot holds parameters and Adam moments again: 12 bytes per parameter), and the
# 1B model's weights alone (--no-save-optim: a 4-byte-per-parameter snapshot fits). The
# checkpoints are deleted at the end. A benchmark, not a test.
#
#   bench/bench-ckpt.sh            # BENCH_DIR=build/bench-ckpt (the disk measured)
set -euo pipefail
cd "$(dirname "$0")/.."
MC_BIN=${MC_BIN:-./megatron-c}
DIR=${BENCH_DIR:-$PWD/build/bench-ckpt}
[ -x "$MC_BIN" ] || make -s megatron-c
mkdir -p "$DIR"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP" "$DIR"/ck "$DIR"/raw' EXIT

COMMON=(--device cpu --mock-data --vocab-size 50257 --seq-length 128 --max-position-embeddings 128
        --micro-batch-size 1 --global-batch-size 1 --train-iters 1 --lr 1e-4 --log-interval 1
        --eval-iters 0 --hidden-dropout 0 --attention-dropout 0)

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD), $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB"
echo "disk: $(df -h "$DIR" | awk 'NR == 2 {print $1 ", " $4 " free"}') ($DIR)"
echo

# timer NAME LOG: the timer's ms; span LOG FROM TO: seconds between the first lines matching
ms_of() { sed -nE "s/^    $1 \\.+: \\(([0-9.]+), [0-9.]+\\)$/\\1/p" "$2" | tail -n 1; }
span() {
    python3 - "$@" <<'EOF'
import re, sys
from datetime import datetime
log, a, b = sys.argv[1:]
def when(pat):
    for line in open(log):
        if re.search(pat, line):
            return datetime.strptime(re.search(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6})\]", line).group(1), "%Y-%m-%d %H:%M:%S.%f")
    sys.exit("no line matching %r in %s" % (pat, log))
print("%.2f" % (when(b) - when(a)).total_seconds())
EOF
}
drop_cache() { find "$1" -type f -exec dd if={} iflag=nocache count=0 status=none \;; }

# bench NAME FLAGS...: prints one table row
bench() {
    local name=$1
    shift
    local args=("${COMMON[@]}" "$@")
    rm -rf "$DIR/ck"
    echo "\$ $MC_BIN ${args[*]} --save $DIR/ck --save-interval 1 [--async-save]" >>"$TMP/notes"
    "$MC_BIN" "${args[@]}" --save "$DIR/ck" --save-interval 1 >"$TMP/sync" 2>&1 ||
        { echo "| $name | sync run failed: $(tail -c 300 "$TMP/sync") |"; return; }
    local params bytes sync_ms
    params=$(sed -nE 's/.*model parallel rank \(0, 0\): ([0-9]+)$/\1/p' "$TMP/sync")
    bytes=$(du -sb "$DIR/ck/iter_0000001" | cut -f1)
    sync_ms=$(ms_of save-checkpoint "$TMP/sync")
    sed -n '/> memory plan/,/total/p' "$TMP/sync" | sed "s/^/    [$name, sync] /" >>"$TMP/notes"

    drop_cache "$DIR/ck"
    "$MC_BIN" "${args[@]}" --load "$DIR/ck" --skip-train >"$TMP/load" 2>&1 ||
        { echo "| $name | load failed: $(tail -c 300 "$TMP/load") |"; return; }
    local load_ms
    load_ms=$(ms_of load-checkpoint "$TMP/load")

    rm -rf "$DIR/ck"
    local async_blocked="-" async_s="-" async_note=""
    if "$MC_BIN" "${args[@]}" --save "$DIR/ck" --save-interval 1 --async-save >"$TMP/async" 2>&1; then
        async_blocked=$(awk -v m="$(ms_of save-checkpoint "$TMP/async")" 'BEGIN { printf "%.2f", m / 1000 }')
        async_s=$(span "$TMP/async" 'saving checkpoint at iteration' 'successfully saved checkpoint')
        sed -n '/> memory plan/,/total/p' "$TMP/async" | sed "s/^/    [$name, async] /" >>"$TMP/notes"
        [ "$(du -sb "$DIR/ck/iter_0000001" | cut -f1)" = "$bytes" ] || async_note=" (size differs!)"
    else
        async_note=" ($(grep -o 'the memory plan needs [^(]*' "$TMP/async" || tail -c 200 "$TMP/async"))"
    fi
    rm -rf "$DIR/ck"

    # the disk alone: the same bytes, written and fsynced
    local blocks=$(((bytes + 67108863) / 67108864)) raw_s raw_rate
    local t0 t1
    t0=$(date +%s.%N)
    dd if=/dev/zero of="$DIR/raw" bs=64M count=$blocks conv=fsync status=none
    t1=$(date +%s.%N)
    raw_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
    rm -f "$DIR/raw"
    raw_rate=$(awk -v b="$((blocks * 67108864))" -v s="$raw_s" 'BEGIN { printf "%.0f", b / s / 1e6 }')
    raw_s=$(awk -v r="$raw_rate" -v b="$bytes" 'BEGIN { printf "%.2f", b / (r * 1e6) }')

    awk -v n="$name" -v p="$params" -v b="$bytes" -v sm="$sync_ms" -v lm="$load_ms" \
        -v ab="$async_blocked" -v as="$async_s" -v an="$async_note" -v rs="$raw_s" -v rr="$raw_rate" 'BEGIN {
        printf "| %s | %.3f B | %.2f GB | %.2f s (%.0f MB/s) | %s s | %s s%s | %.2f s (%.2f GB/s) | %s s (%s MB/s) | %.2f |\n",
            n, p / 1e9, b / 1e9, sm / 1000, b / (sm / 1000) / 1e6, ab, as, an, lm / 1000, b / (lm / 1000) / 1e9,
            rs, rr, (sm / 1000) / rs }'
}

echo "| model | parameters | checkpoint | sync save (loop blocked) | async: loop blocked | async: save until durable | load | raw dd write, same bytes | sync / raw |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
bench "24 layers, hidden 1792" --num-layers 24 --hidden-size 1792 --num-attention-heads 16
bench "24 layers, hidden 1280" --num-layers 24 --hidden-size 1280 --num-attention-heads 16
# the 1B model's weights alone (4 bytes per parameter): its snapshot fits beside training
bench "24 layers, hidden 1792, weights only" --num-layers 24 --hidden-size 1792 --num-attention-heads 16 \
    --no-save-optim --no-load-optim
echo
cat "$TMP/notes"
