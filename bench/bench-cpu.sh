#!/usr/bin/env bash
# CPU benchmark: one fp32 training step of a small GPT in megatron-c (OpenBLAS GEMM) against the
# same model in PyTorch (bench/bench_cpu_torch.py), each on one thread, pinned to one core when
# taskset is available. Prints a table with ms/step, tokens/s, GFLOP/s and the ratio
# PyTorch time / megatron-c time (> 1: megatron-c is faster). A benchmark, not a test: it never
# fails on speed (it fails only when a side cannot run).
#
#   bench/bench-cpu.sh
#   BENCH_LAYERS=2 BENCH_HIDDEN=512 bench/bench-cpu.sh     # another config
#
# Environment (defaults in brackets): BENCH_LAYERS [4] BENCH_HIDDEN [256] BENCH_HEADS [8]
# BENCH_SEQ [256] BENCH_MBS [4] BENCH_GBS [4] BENCH_VOCAB [8192] (padded to a multiple of 128),
# BENCH_ITERS [30] and BENCH_LOG_INTERVAL [10] (megatron-c: the last interval's average is used),
# BENCH_TORCH_WARMUP [3] BENCH_TORCH_STEPS [10] (PyTorch: median of the timed steps),
# BENCH_TORCH_ENV [] (extra VAR=value words for the PyTorch side only, e.g. glibc malloc tuning),
# BENCH_REPEAT [1] (runs of each side, alternating; the fastest is reported),
# BENCH_CPU [0] (the core to pin to), PYTHON [/usr/bin/python3], BENCH_LOG_DIR [a temp dir].
# PyTorch: scripts/install-deps.sh --torch installs Debian's python3-torch.
set -euo pipefail
cd "$(dirname "$0")/.."

L=${BENCH_LAYERS:-4}
H=${BENCH_HIDDEN:-256}
NH=${BENCH_HEADS:-8}
S=${BENCH_SEQ:-256}
MBS=${BENCH_MBS:-4}
GBS=${BENCH_GBS:-4}
V=${BENCH_VOCAB:-8192}
ITERS=${BENCH_ITERS:-30}
LOGI=${BENCH_LOG_INTERVAL:-10}
WARM=${BENCH_TORCH_WARMUP:-3}
STEPS=${BENCH_TORCH_STEPS:-10}
CPU=${BENCH_CPU:-0}
REPEAT=${BENCH_REPEAT:-1}
PYTHON=${PYTHON:-/usr/bin/python3}
LOGDIR=${BENCH_LOG_DIR:-$(mktemp -d /tmp/bench-cpu.XXXXXX)}
mkdir -p "$LOGDIR"
VPAD=$(( (V + 127) / 128 * 128 ))

die() { echo "bench-cpu: $*" >&2; exit 1; }

# One thread everywhere: OpenBLAS (both sides: megatron-c links it, Debian's torch reaches it
# through libblas.so.3), OpenMP (torch's intra-op pool).
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
PIN=()
if command -v taskset >/dev/null 2>&1 && taskset -c "$CPU" true 2>/dev/null; then
    PIN=(taskset -c "$CPU")
fi
ENVSTR="OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1"
PINSTR="${PIN[*]+${PIN[*]} }"

# ---- build ---------------------------------------------------------------------------------
echo "bench-cpu: make megatron-c" >&2
make -s megatron-c >"$LOGDIR/build.log" 2>&1 || { tail -20 "$LOGDIR/build.log" >&2; die "build failed (log: $LOGDIR/build.log)"; }
[ -x ./megatron-c ] || die "./megatron-c missing after make"
"$PYTHON" -c 'import torch' 2>/dev/null || die "PyTorch not importable by $PYTHON (scripts/install-deps.sh --torch)"

# ---- megatron-c ----------------------------------------------------------------------------
HELP=$(./megatron-c --help 2>&1 || true)
has_flag() { grep -q -- "$1\b" <<<"$HELP"; }
MC=(./megatron-c --device cpu)
NOTES=()
[ ${#PIN[@]} -gt 0 ] || NOTES+=("not pinned to a core (taskset missing or core $CPU unavailable)")
if has_flag --cpu-threads; then MC+=(--cpu-threads 1); else NOTES+=("--cpu-threads not accepted by this build: OPENBLAS_NUM_THREADS=1 only"); fi
MC+=(--mock-data --vocab-size "$V" --num-layers "$L" --hidden-size "$H"
     --num-attention-heads "$NH" --seq-length "$S" --max-position-embeddings "$S"
     --micro-batch-size "$MBS" --global-batch-size "$GBS" --train-iters "$ITERS"
     --lr 1e-4 --lr-decay-style constant --weight-decay 0.01 --adam-beta1 0.9 --adam-beta2 0.999
     --clip-grad 1.0 --hidden-dropout 0 --attention-dropout 0 --seed 1234
     --log-interval "$LOGI")
if has_flag --eval-iters; then MC+=(--eval-iters 0); else NOTES+=("--eval-iters not accepted: the final evaluation runs (after the timed iterations)"); fi

# ---- runs ----------------------------------------------------------------------------------
PT_ENV=()
[ -n "${BENCH_TORCH_ENV:-}" ] && read -r -a PT_ENV <<<"$BENCH_TORCH_ENV"
PT=("$PYTHON" bench/bench_cpu_torch.py --num-layers "$L" --hidden-size "$H"
    --num-attention-heads "$NH" --seq-length "$S" --micro-batch-size "$MBS"
    --global-batch-size "$GBS" --vocab-size "$V" --warmup-steps "$WARM" --steps "$STEPS")
run_mc() {  # $1: run number; sets MC_MS, MC_LAST
    local log="$LOGDIR/megatron-c.$1.log"
    echo "bench-cpu: [$1/$REPEAT] megatron-c ($ITERS iterations)" >&2
    if ! "${PIN[@]}" "${MC[@]}" >"$log" 2>&1; then
        tail -20 "$log" >&2
        die "megatron-c failed (log: $log)"
    fi
    grep -E 'iteration +[0-9]+/' "$log" | awk -F'|' '{print "  " $1 "|" $3 "|" $6}' >&2 || true
    MC_MS=$(grep -o 'elapsed time per iteration (ms): *[0-9.]*' "$log" | tail -1 | grep -o '[0-9.]*$' || true)
    [ -n "$MC_MS" ] || die "no 'elapsed time per iteration (ms)' line in $log"
    MC_LAST=$(grep -o 'iteration *[0-9]*/' "$log" | tail -1 | grep -o '[0-9]*' || true)
    MC_LAST=${MC_LAST:-$ITERS}
}
run_pt() {  # $1: run number; sets PT_MS
    local log="$LOGDIR/torch.$1.log"
    echo "bench-cpu: [$1/$REPEAT] PyTorch ($WARM warm-up + $STEPS timed steps)" >&2
    if ! env "${PT_ENV[@]+"${PT_ENV[@]}"}" "${PIN[@]}" "${PT[@]}" >"$log" 2>&1; then
        tail -20 "$log" >&2
        die "PyTorch benchmark failed (log: $log)"
    fi
    grep -E '^(torch|median)' "$log" | sed 's/^/  /' >&2 || true
    PT_MS=$(grep '^ms_per_step:' "$log" | tail -1 | awk '{print $2}')
    [ -n "$PT_MS" ] || die "no ms_per_step line in $log"
}

# The two sides alternate; with BENCH_REPEAT > 1 the fastest run of each side is reported (the
# least disturbed by other processes on a shared machine), and every run is listed.
MC_ALL=() PT_ALL=()
for r in $(seq 1 "$REPEAT"); do
    run_mc "$r"; MC_ALL+=("$MC_MS")
    run_pt "$r"; PT_ALL+=("$PT_MS")
done
MC_MS=$(printf '%s\n' "${MC_ALL[@]}" | sort -g | head -1)
PT_MS=$(printf '%s\n' "${PT_ALL[@]}" | sort -g | head -1)

# ---- table ---------------------------------------------------------------------------------
# FLOPs per step (Megatron's num_floating_point_operations; MHA, ffn 4h): 72 B s L h^2 + 6 B s^2 L h + 6 B s h V
awk -v mc="$MC_MS" -v pt="$PT_MS" -v L="$L" -v H="$H" -v NH="$NH" -v S="$S" -v MBS="$MBS" \
    -v GBS="$GBS" -v V="$V" -v VP="$VPAD" -v lo=$((MC_LAST > LOGI ? MC_LAST - LOGI + 1 : 1)) \
    -v hi="$MC_LAST" -v w="$WARM" -v n="$STEPS" -v R="$REPEAT" 'BEGIN {
    tok = GBS * S
    F = 72.0*GBS*S*L*H*H + 6.0*GBS*S*S*L*H + 6.0*GBS*S*H*VP
    printf "\nCPU training step, fp32, one thread each\n"
    printf "config: layers %d, hidden %d, heads %d, seq %d, micro-batch %d, global batch %d, vocab %d (padded %d); %.2f GFLOP/step\n\n", L, H, NH, S, MBS, GBS, V, VP, F/1e9
    printf "%-11s %12s %10s %9s  %s\n", "", "ms/step", "tokens/s", "GFLOP/s", "timing"
    printf "%-11s %12.1f %10.0f %9.2f  %s\n", "megatron-c", mc, tok/mc*1000, F/mc/1e6, sprintf("mean of iterations %d..%d%s", lo, hi, R > 1 ? sprintf(", best of %d runs", R) : "")
    printf "%-11s %12.1f %10.0f %9.2f  %s\n", "PyTorch", pt, tok/pt*1000, F/pt/1e6, sprintf("median of %d steps after %d warm-up%s", n, w, R > 1 ? sprintf(", best of %d runs", R) : "")
    printf "\nratio (PyTorch ms / megatron-c ms): %.2f  (> 1: megatron-c is faster)\n", pt/mc
}'
if [ "$REPEAT" -gt 1 ]; then
    echo "all runs (ms/step): megatron-c ${MC_ALL[*]}; PyTorch ${PT_ALL[*]}"
fi
echo
echo "commands:"
echo "  $ENVSTR $PINSTR${MC[*]}"
echo "  $ENVSTR ${PT_ENV[*]+${PT_ENV[*]} }$PINSTR${PT[*]}"
for n in "${NOTES[@]+"${NOTES[@]}"}"; do echo "note: $n"; done
echo "logs: $LOGDIR"
