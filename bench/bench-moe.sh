#!/usr/bin/env bash
# MoE benchmark (docs/PERF.md, "Mixture of experts on the CPU"): the step time of an MoE model
# (8 experts, top-2) against the dense model of the same active parameters (ffn = top-k x the
# experts' ffn: the same MLP GEMM work per token), on one rank and on two (dp 2 for both; the MoE
# model also at ep 2, its experts split over the two ranks), and at ep 2 the all-to-alls' share
# of the step: the milliseconds this rank spends in the ep group's blocking all-to-alls
# (--timing-log-level 2, the wait for the slower rank included) over the iteration's. A
# benchmark, not a test: it never fails on speed, only when a run fails.
#
#   MC_BIN=build/rel/megatron-c bench/bench-moe.sh      # BENCH_ITERS=4
#
# Environment: MC_BIN [./megatron-c], BENCH_ITERS [4] (timed iterations, after 2 warm-up ones),
# MPIRUN [mpirun --allow-run-as-root --oversubscribe].
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/mpi-env.sh
ITERS=${BENCH_ITERS:-4}
command -v "${MPIRUN[0]}" >/dev/null || { echo "bench-moe: ${MPIRUN[0]} not found" >&2; exit 1; }

TOTAL=$((ITERS + 2))
COMMON=(--device cpu --cpu-threads 1 --mock-data --num-layers 4 --hidden-size 256
        --num-attention-heads 4 --seq-length 256 --max-position-embeddings 256
        --position-embedding-type rope --normalization RMSNorm --swiglu --disable-bias-linear
        --untie-embeddings-and-output-weights --vocab-size 4096 --micro-batch-size 2
        --global-batch-size 8 --train-iters $TOTAL --lr 1e-4 --log-interval $ITERS --eval-iters 0
        --timing-log-level 2)
DENSE=(--ffn-hidden-size 1024)
MOE=(--ffn-hidden-size 1024 --num-experts 8 --moe-ffn-hidden-size 512 --moe-router-topk 2
     --moe-token-dispatcher-type alltoall --moe-aux-loss-coeff 1e-2)

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# "ms/iter a2a-ms a2a-calls a2a-MB": the last log interval's, this (the last) rank's ep group
measure() { # np, flags...
    local np=$1
    shift
    local run=("$MC_BIN")
    [ "$np" -gt 1 ] && run=("${MPIRUN[@]}" -np "$np" "$MC_BIN")
    "${run[@]}" "${COMMON[@]}" "$@" >"$TMP/log" 2>"$TMP/err" || {
        echo "bench-moe: np=$np $* failed:" >&2
        tail -5 "$TMP/err" >&2
        exit 1
    }
    local it a2a
    it=$(grep -E 'elapsed time per iteration' "$TMP/log" | tail -1 |
        sed -E 's/.*elapsed time per iteration \(ms\): ([0-9.]+).*/\1/')
    a2a=$(grep -E '^ +ep all-to-all' "$TMP/log" | tail -1 |
        sed -E 's/.*: \(([0-9.]+), ([0-9.]+), ([0-9.]+)\)/\3 \1 \2/')
    echo "$it ${a2a:-0 0 0}"
}

row() { # name, ranks, flags...
    local name=$1 np=$2
    shift 2
    read -r it ms calls mb <<<"$(measure "$np" "$@")"
    local share="-"
    [ "$calls" != 0 ] && share=$(awk -v a="$ms" -v t="$it" 'BEGIN { printf "%.1f%%", 100 * a / t }')
    local tok
    tok=$(awk -v t="$it" 'BEGIN { printf "%.0f", 8 * 256 / (t / 1000) }')
    echo "| $name | $np | $it | $tok | $calls, $mb | $ms | $share |"
}

echo "model: 4 layers, hidden 256, seq 256, vocab 4096, global batch 8 of micro batches of 2;"
echo "MoE: 8 experts of ffn 512, top-2, aux loss; dense: ffn 1024 (the same active MLP parameters);"
echo "$(nproc) cores, OpenBLAS 1 thread per rank; the last $ITERS of $TOTAL iterations timed"
echo
echo "| model | ranks | ms/iter | tokens/s | ep all-to-all per iter (calls, MB) | all-to-all ms | all-to-all share |"
echo "|:---|---:|---:|---:|---:|---:|---:|"
row "dense" 1 "${DENSE[@]}"
row "MoE" 1 "${MOE[@]}"
row "dense, dp 2" 2 "${DENSE[@]}"
row "MoE, dp 2 (ep 1)" 2 "${MOE[@]}"
row "MoE, ep 2 (dp 2)" 2 "${MOE[@]}" --expert-model-parallel-size 2
