#!/usr/bin/env bash
# Data-parallel benchmark (docs/PERF.md, "Data parallelism"): per-iteration time of dp = 1, 2, 4
# ranks on the CPU backend (mpirun, MPI collectives over shared memory), each with and without
# --overlap-grad-reduce, for the same model and global batch, and from --timing-log-level 1 the
# time each iteration still waits for the gradient reduction after the backward
# (Megatron's all-grads-sync timer, the max over ranks). Without overlap that is the whole
# reduction; with overlap it is the part the backward did not hide, so
#     hidden = 1 - all-grads-sync(overlap) / all-grads-sync(no overlap).
# The model is chosen so that the gradients (66 MB) are large next to the compute of a
# microbatch (short sequences), where overlap matters. A benchmark, not a test: it never fails on
# speed, only when a run fails.
#
#   bench/bench-dp.sh                       # BENCH_ITERS=20 BENCH_DPS="1 2 4"
#
# Environment: MC_BIN [./megatron-c], BENCH_ITERS [20] (timed iterations, after 5 warm-up
# ones), BENCH_DPS ["1 2 4"], BENCH_BUCKET [4000000] (elements per bucket with overlap),
# MPIRUN [mpirun --allow-run-as-root --oversubscribe].
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/mpi-env.sh
ITERS=${BENCH_ITERS:-20}
DPS=${BENCH_DPS:-1 2 4}
BUCKET=${BENCH_BUCKET:-4000000}
command -v "${MPIRUN[0]}" >/dev/null || { echo "bench-dp: ${MPIRUN[0]} not found (scripts/install-deps.sh)" >&2; exit 1; }

GBS=4
TOTAL=$((ITERS + 5))
MODEL=(--device cpu --cpu-threads 1 --mock-data --num-layers 4 --hidden-size 512
       --num-attention-heads 8 --seq-length 32 --max-position-embeddings 32 --vocab-size 8192
       --micro-batch-size 1 --global-batch-size $GBS --train-iters $TOTAL --lr 1e-4
       --log-interval 5 --eval-iters 0 --timing-log-level 1)

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# the last log interval's ms/iteration and its all-grads-sync max (ms)
measure() { # np, extra flags...
    local np=$1
    shift
    "${MPIRUN[@]}" -np "$np" "$MC_BIN" "${MODEL[@]}" "$@" >"$TMP/log" 2>"$TMP/err" || {
        echo "bench-dp: dp=$np $* failed:" >&2
        tail -5 "$TMP/err" >&2
        exit 1
    }
    local it sync
    it=$(grep -E 'elapsed time per iteration' "$TMP/log" | tail -1 |
        sed -E 's/.*elapsed time per iteration \(ms\): ([0-9.]+).*/\1/')
    sync=$(grep -E 'all-grads-sync' "$TMP/log" | tail -1 | sed -E 's/.*: \(([0-9.]+), ([0-9.]+)\)/\2/')
    echo "$it ${sync:-0}"
}

echo "model: 4 layers, hidden 512, seq 32, vocab 8192 (16.7M parameters, 67 MB of fp32 gradients),"
echo "global batch $GBS of micro batches of 1, $(nproc) cores, OpenBLAS 1 thread per rank; $ITERS iterations timed"
echo
echo "| dp | microbatches/rank | ms/iter | all-grads-sync ms | ms/iter, overlap | all-grads-sync ms, overlap | reduction hidden |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
for dp in $DPS; do
    read -r t0 s0 < <(measure "$dp")
    read -r t1 s1 < <(measure "$dp" --overlap-grad-reduce --ddp-bucket-size "$BUCKET")
    hidden=$(awk -v a="$s0" -v b="$s1" 'BEGIN { if (a > 0) printf "%.0f%%", 100 * (1 - b / a); else print "-" }')
    echo "| $dp | $((GBS / dp)) | $t0 | $s0 | $t1 | $s1 | $hidden |"
done
echo
echo "command: ${MPIRUN[*]} -np DP $MC_BIN ${MODEL[*]} [--overlap-grad-reduce --ddp-bucket-size $BUCKET]"
