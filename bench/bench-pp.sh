#!/usr/bin/env bash
# Pipeline bubble benchmark (docs/PERF.md, "Pipeline parallelism"): for several pipeline sizes
# p, microbatch counts m and virtual stages v, on the CPU backend under mpirun, each rank's idle
# time in the schedule against the paper's bubble fraction (p-1)/m (1F1B) and (p-1)/(v*m)
# (interleaved). Idle time is what a rank spends waiting in pipeline p2p (the level-2 p2p timers
# of --timing-log-level 2, per rank with --timing-log-option all); the measured bubble fraction is
# idle / (forward-backward - idle), the paper's t_pb / t_id. Stages cost the same: every stage has
# the same number of layers and the vocabulary is small, so embedding and loss add little. Also
# the activation memory of each schedule from the memory plan (the largest stage). A benchmark,
# not a test; ranks beyond the machine's cores share cores, which inflates the idle time.
#
#   bench/bench-pp.sh          # BENCH_ITERS=6
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/mpi-env.sh
ITERS=${BENCH_ITERS:-6}

L=8 H=256 S=128 MB=1
HALF=$((ITERS / 2))
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
CORES=$(nproc)

echo "model: $L layers, hidden $H, heads 8, seq $S, micro batch $MB, vocab 256, no dropout; $CORES cores,"
echo "OpenBLAS 1 thread per rank; the second log interval ($HALF iterations) of $ITERS timed"
echo
echo "| p | v | m | cores | ms/iter | idle / compute, max over ranks | mean over ranks | plan: bubble (p-1)/(v·m) | activations in flight (largest stage) | activation MiB |"
echo "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"
run() { # p v m
    local p=$1 v=$2 m=$3 vflag=()
    [ "$v" -gt 1 ] && vflag=(--num-virtual-stages-per-pipeline-rank "$v")
    local args=(--device cpu --cpu-threads 1 --mock-data --num-layers $L \
        --hidden-size $H --num-attention-heads 8 --seq-length $S --max-position-embeddings $S \
        --vocab-size 256 --make-vocab-size-divisible-by 64 --micro-batch-size $MB \
        --global-batch-size "$m" --train-iters "$ITERS" --lr 1e-4 --log-interval "$HALF" \
        --eval-iters 0 --hidden-dropout 0 --attention-dropout 0 --timing-log-level 2 \
        --timing-log-option all --pipeline-model-parallel-size "$p" "${vflag[@]}")
    "${MPIRUN[@]}" -np "$p" "$MC_BIN" "${args[@]}" >"$TMP/out" 2>&1 \
        || { echo "| $p | $v | $m | run failed: $(tail -c 200 "$TMP/out") |"; return; }
    # megatron-c plan's prediction for the same line
    local planned
    planned=$("$MC_BIN" plan --num-gpus "$p" "${args[@]}" | sed -nE 's/.*\(p-1\)\/\(v\*m\) = ([0-9.]+).*/\1/p')
    # the last timer block: per timer, per rank "rank  r: ms"
    awk -v p="$p" -v v="$v" -v m="$m" -v cores="$CORES" -v planned="${planned:-?}" '
        /elapsed time per iteration \(ms\):/ { split($0, a, "elapsed time per iteration \\(ms\\): "); split(a[2], b, " "); ms = b[1]; delete fb; delete idle; inblock = 0 }
        /times across ranks \(ms\):/ { inblock = 1; next }
        inblock && /^  [a-z-]+:$/ { name = $1; sub(":", "", name); next }
        inblock && /^     rank/ { r = $2 + 0; t = $3 + 0
            if (name == "forward-backward") fb[r] = t
            else if (name ~ /(recv|send)/) idle[r] += t }
        /activations \(/ { s = $0; sub(/.*activations \(/, "", s); split(s, q, " "); inflight = q[1]; mib = $(NF-1) }
        END {
            mx = 0; sum = 0
            for (r = 0; r < p; r++) { f = (fb[r] - idle[r] > 0) ? idle[r] / (fb[r] - idle[r]) : 0; if (f > mx) mx = f; sum += f }
            printf "| %d | %d | %d | %s | %.1f | %.3f | %.3f | %s | %s | %s |\n", p, v, m, (p > cores ? cores " (shared)" : p), ms, mx, sum / p, planned, inflight, mib
        }' "$TMP/out"
}
for m in 2 4 8 16; do run 2 1 "$m"; run 2 2 "$m"; done
for m in 4 8 16; do run 4 1 "$m"; run 4 2 "$m"; done
