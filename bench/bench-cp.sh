#!/usr/bin/env bash
# Context-parallel benchmark (docs/PERF.md, "Context parallelism"): a long sequence (8192 by
# default) on the CPU backend under mpirun at cp = 1, 2 and 4 (p2p; a2a and all_gather at cp 2
# and 4 too): the start-up memory plan per rank (activations, workspace, total), the time per
# iteration, and the cp group's traffic per iteration as the comm layer counts it
# (--timing-log-level 1), beside `megatron-c plan`'s prediction of that traffic for an H100. A
# benchmark, not a test.
#
#   bench/bench-cp.sh           # BENCH_ITERS=3 BENCH_SEQ=8192
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/mpi-env.sh
ITERS=${BENCH_ITERS:-3}
S=${BENCH_SEQ:-8192}
read -r -a TYPES <<<"${BENCH_TYPES:-p2p a2a all_gather}"

L=2 H=256 NH=4
TOTAL=$((ITERS + 1))
MODEL=(--device cpu --cpu-threads 1 --mock-data --num-layers $L --hidden-size $H
       --num-attention-heads $NH --seq-length "$S" --max-position-embeddings "$S" --vocab-size 8192
       --micro-batch-size 1 --global-batch-size 1 --train-iters $TOTAL --lr 1e-4
       --log-interval $ITERS --eval-iters 0 --timing-log-level 1 --attention-dropout 0.1)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

echo "model: $L layers, hidden $H, $NH heads (head dim $((H / NH))), seq $S, micro batch 1, vocab 8192;"
echo "$(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1 /proc/loadavg) at the start), OpenBLAS 1 thread per rank; the last $ITERS of $TOTAL iterations timed"
echo
echo "| cp | comm type | ranks | ms/iter | activations/rank | workspace/rank | total/rank | cp traffic/iter (calls, MB) | plan's cp traffic (calls, MB) |"
echo "|---:|:---|---:|---:|---:|---:|---:|---:|---:|"
plan_row() { awk '/^> memory plan/ { on = 1 } on && $1 == "'"$1"'" { print $(NF - 1), $NF; exit }' "$2"; }
for cp in 1 2 4; do
    for t in "${TYPES[@]}"; do
        [ $cp -eq 1 ] && [ "$t" != "${TYPES[0]}" ] && continue
        flags=(--context-parallel-size $cp --cp-comm-type $t)
        "${MPIRUN[@]}" -np $cp "$MC_BIN" "${MODEL[@]}" "${flags[@]}" >"$TMP/log" 2>"$TMP/err" || {
            echo "bench-cp: cp=$cp $t failed:" >&2
            tail -5 "$TMP/err" >&2
            exit 1
        }
        "$MC_BIN" plan --num-gpus $cp --gpu h100 "${MODEL[@]:2}" "${flags[@]}" >"$TMP/plan" 2>&1
        it=$(grep 'elapsed time per iteration' "$TMP/log" | tail -1 | sed -E 's/.*iteration \(ms\): ([0-9.]+).*/\1/')
        act=$(plan_row activations "$TMP/log") ws=$(plan_row workspace "$TMP/log") tot=$(plan_row total "$TMP/log")
        cpv=$(awk '/^communication per iteration/ { c = 0; mb = 0 } $1 ~ /^cp(-a2a|-p2p)?$/ { gsub(/[(),:]/, " "); c += $(NF - 1); mb += $NF } END { printf "%d, %.2f", c, mb }' "$TMP/log")
        pl=$(sed -nE 's/.*context-parallel attention .* ([0-9]+) calls, ([0-9]+) bytes per GPU/\1 \2/p' "$TMP/plan" |
            awk '{ printf "%d, %.2f", $1, $2 / 1e6 }')
        echo "| $cp | $t | $cp | $it | $act | $ws | $tot | ${cpv} | ${pl:--} |"
    done
done
echo
echo "command: ${MPIRUN[*]} -np CP $MC_BIN ${MODEL[*]} --context-parallel-size CP --cp-comm-type TYPE"
