#!/usr/bin/env bash
# --tp-comm-overlap on the CPU (docs/PERF.md, "Tensor parallelism on the CPU: how much of the
# communication the overlap hides"): tp = 2 and 4 with --sequence-parallel under mpirun, each
# with and without --tp-comm-overlap, reading the comm layer's milliseconds per iteration on the
# tp group (--timing-log-level 2: the blocking collectives' time, and with the overlap the waits
# on its chunked requests, i.e. what the GEMMs did not hide), on rank 0. Hidden =
# 1 - tp ms (overlap) / tp ms (no overlap). A benchmark, not a test.
#
#   bench/bench-tp-overlap.sh          # BENCH_ITERS=10 BENCH_TPS="2 4"
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/mpi-env.sh
ITERS=${BENCH_ITERS:-10}

L=4 H=256 S=128 MB=2 GBS=4
TOTAL=$((ITERS + 5))
MODEL=(--device cpu --cpu-threads 1 --mock-data --num-layers $L --hidden-size $H
       --num-attention-heads 8 --seq-length $S --max-position-embeddings $S --vocab-size 8192
       --micro-batch-size $MB --global-batch-size $GBS --train-iters $TOTAL --lr 1e-4
       --log-interval $ITERS --eval-iters 0 --timing-log-level 2 --sequence-parallel)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

echo "model: $L layers, hidden $H, seq $S, micro batch $MB, $((GBS / MB)) microbatches, vocab 8192;"
echo "$(nproc) cores, OpenBLAS 1 thread per rank; the last log interval ($ITERS iterations) of $TOTAL"
echo
echo "| tp | ms/iter | tp ms/iter | ms/iter, overlap | tp ms/iter exposed, overlap | tp communication hidden |"
echo "|---:|---:|---:|---:|---:|---:|"
run() { # tp flags... -> "ms/iter tp-ms"
    local tp=$1
    shift
    "${MPIRUN[@]}" -np "$tp" "$MC_BIN" "${MODEL[@]}" --tensor-model-parallel-size "$tp" "$@" \
        >"$TMP/log" 2>"$TMP/err" || { echo "bench-tp-overlap: tp=$tp failed:" >&2; tail -5 "$TMP/err" >&2; exit 1; }
    it=$(grep 'elapsed time per iteration' "$TMP/log" | tail -1 | sed -E 's/.*iteration \(ms\): ([0-9.]+).*/\1/')
    ms=$(awk '/^communication per iteration/ { s = 0 } /^    tp / { gsub(/[()]/, ""); n = split($0, f, ","); s += f[n] } END { printf "%.2f", s }' "$TMP/log")
    echo "$it $ms"
}
for tp in ${BENCH_TPS:-2 4}; do
    read -r it ms <<<"$(run "$tp")"
    read -r it_o ms_o <<<"$(run "$tp" --tp-comm-overlap)"
    echo "| $tp | $it | $ms | $it_o | $ms_o | $(awk -v a="$ms" -v b="$ms_o" 'BEGIN { printf "%.0f%%", (1 - b / a) * 100 }') |"
done
