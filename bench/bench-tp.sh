#!/usr/bin/env bash
# Tensor-parallel benchmark (docs/PERF.md, "Tensor parallelism"): for tp = 1, 2, 4 (with and
# without --sequence-parallel) on the CPU backend under mpirun, the per-iteration time and the
# collective volume per iteration on the tp group as the comm layer counts it
# (--timing-log-level 1), against the paper's analytical count: per layer and microbatch,
# 4 all-reduces of b*s*h values (2 in forward, 2 in backward), plus the 2 of the vocab-parallel
# embedding (forward) and output layer (backward) and the [b*s] loss statistics, which the
# paper leaves out. With sequence parallelism each all-reduce becomes an all-gather plus a
# reduce-scatter of the same total size; "overlap" rows add --tp-comm-overlap (its all-gathers
# are p2p batches of chunks, counted as the bytes a rank sends plus those it receives). The comm layer counts, per call, the larger of a rank's
# input and output (an all-reduce of X bytes counts X, an all-gather into X bytes counts X);
# "ring MB" converts that into what each rank sends with ring algorithms: 2(t-1)/t·X for an
# all-reduce, (t-1)/t·X for a reduce-scatter or all-gather. A benchmark, not a test.
#
#   bench/bench-tp.sh          # BENCH_ITERS=10
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/mpi-env.sh
ITERS=${BENCH_ITERS:-10}

L=4 H=256 S=128 MB=2 GBS=4
TOTAL=$((ITERS + 5))
MODEL=(--device cpu --cpu-threads 1 --mock-data --num-layers $L --hidden-size $H
       --num-attention-heads 8 --seq-length $S --max-position-embeddings $S --vocab-size 8192
       --micro-batch-size $MB --global-batch-size $GBS --train-iters $TOTAL --lr 1e-4
       --log-interval 5 --eval-iters 0 --timing-log-level 1)
M=$((GBS / MB))
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

echo "model: $L layers, hidden $H, seq $S, micro batch $MB, $M microbatches per iteration, vocab 8192;"
echo "$(nproc) cores, OpenBLAS 1 thread per rank; the last log interval (5 iterations) of $TOTAL timed"
echo
echo "| tp | sequence parallel | ms/iter | tp collectives/iter | counted MB/iter | ring MB/iter sent per rank | paper: 4·L·M all-reduces of b·s·h | their MB | their ring MB | + embedding, output layer, loss stats (MB) |"
echo "|---:|:---:|---:|---|---:|---:|---:|---:|---:|---:|"
bsh=$((MB * S * H * 4))
paper_n=$((4 * L * M))
paper_mb=$(awk -v n=$paper_n -v b=$bsh 'BEGIN { printf "%.3f", n * b / 1e6 }')
extra_mb=$(awk -v n=$paper_n -v b=$bsh -v m=$M -v bs=$((MB * S * 4)) 'BEGIN { printf "%.3f", (n * b + 2 * m * b + 3 * m * bs) / 1e6 }')
for tp in 1 2 4; do
    for sp in no yes overlap; do
        [ $tp -eq 1 ] && [ $sp != no ] && continue
        flags=(--tensor-model-parallel-size $tp)
        [ $sp != no ] && flags+=(--sequence-parallel)
        [ $sp = overlap ] && flags+=(--tp-comm-overlap)
        "${MPIRUN[@]}" -np $tp "$MC_BIN" "${MODEL[@]}" "${flags[@]}" >"$TMP/log" 2>"$TMP/err" || {
            echo "bench-tp: tp=$tp failed:" >&2
            tail -5 "$TMP/err" >&2
            exit 1
        }
        it=$(grep 'elapsed time per iteration' "$TMP/log" | tail -1 | sed -E 's/.*iteration \(ms\): ([0-9.]+).*/\1/')
        # the last interval's tp rows: "tp all-reduce ....: (calls, MB)"
        rows=$(awk '/^communication per iteration/ { buf = "" } /^    tp / { buf = buf $0 "\n" } END { printf "%s", buf }' "$TMP/log")
        calls=$(echo "$rows" | sed -nE 's/^    tp ([a-z0-9-]+) .*: \(([0-9.]+), ([0-9.]+)\)/\2 \1/p' | paste -sd, | sed 's/,/, /g')
        mb=$(echo "$rows" | sed -nE 's/.*: \(([0-9.]+), ([0-9.]+)\)/\2/p' | awk '{ s += $1 } END { printf "%.3f", s }')
        ring=$(echo "$rows" | sed -nE 's/^    tp ([a-z0-9-]+) .*: \(([0-9.]+), ([0-9.]+)\)/\1 \3/p' |
            awk -v t=$tp '{ s += $1 == "p2p" ? $2 / 2 : ($1 == "all-reduce" ? 2 : 1) * $2 * (t - 1) / t } END { printf "%.3f", s }')
        paper_ring=$(awk -v x=$paper_mb -v t=$tp 'BEGIN { printf "%.3f", 2 * x * (t - 1) / t }')
        [ $tp -eq 1 ] && { calls="none"; mb="0"; ring="0"; }
        echo "| $tp | $sp | $it | $calls | $mb | $ring | $paper_n | $paper_mb | $paper_ring | $extra_mb |"
    done
done
echo
echo "command: ${MPIRUN[*]} -np TP $MC_BIN ${MODEL[*]} --tensor-model-parallel-size TP [--sequence-parallel]"
