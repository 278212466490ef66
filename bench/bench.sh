#!/usr/bin/env bash
# Training throughput on one GPU: GPT-2 124M, 350M, 1.3B and 2.7B in bf16 on
# mock data, megatron-c against PyTorch peers (bench/gpt_torch.py, eager and torch.compile with
# flash attention through scaled_dot_product_attention) and llm.c (LLMC_DIR) measured in the
# same run; megatron-c twice: its default --attention-backend auto (cuDNN's fused flash attention
# where it takes the shapes) and --attention-backend local (the project's attention kernels),
# each with megatron-c plan's prediction for its attention beside it.
#
#   bench/bench.sh                 all four models, one after the other
#   bench/bench.sh 124M            one model: a step that fits one call of the device tool
#   BENCH_IMPLS="compile llmc" bench/bench.sh 1.3B    some of the implementations (the rest of
#                                    a model whose every implementation does not fit one call)
#
# For each model and implementation, micro batches from a list are tried (largest first) until
# BENCH_TRIES (2) of them ran, and the fastest per token is kept; a micro batch that does not fit
# (megatron-c's memory plan refuses it, PyTorch runs out of memory) is skipped. A step is ACCUM (4)
# micro batches. Reported: tokens/s; TFLOP/s by Megatron's formula (megatron-c's
# --log-throughput; the peer computes the same formula); MFU against PEAK_TFLOPS (989: H100 SXM
# dense bf16); peak GPU memory, sampled with nvidia-smi during the run (the whole process:
# context, workspaces, allocator slack), and for the peer also torch's own max_memory_allocated.
# megatron-c's number is the average of the last LOG_INTERVAL (10) of ITERS (20) iterations; the
# peer times ITERS - 10 steps after 10 warm-up steps (torch.compile compiles there).
#
# Time: each run is cut at BENCH_RUN_TIMEOUT (180 s), and a call stops starting runs once
# BENCH_BUDGET (540 s) is spent (what was not run says so), so that one model fits one 600 s call.
# At 300 TFLOP/s a step of 124M at micro batch 32 is 0.35 s, of 350M at 16 0.5 s, of 1.3B at 8
# and of 2.7B at 4 1.85 s: 20 steps of the two largest micro batches that fit take 10 s (124M) to
# 56 s (1.3B) of compute per implementation, plus start-up; torch.compile adds its compilation to
# each run and llm.c its build (once per BENCH_LOGS). docs/PERF.md says which calls to make.
#
# Prints a markdown table ready for docs/PERF.md, with a row per model and implementation (the
# results of earlier calls into the same BENCH_LOGS included; megatron-c's rows with the plan's
# tokens/s for the same micro batch); writes it to table.md, and one line per model to
# <model>.summary ("bench 124M: megatron-c 512345 tokens/s (micro batch 16; megatron-c plan
# predicted ...); megatron-c --attention-backend local 300000 tokens/s (...; auto 1.71x local);
# PyTorch eager 401000 tokens/s (megatron-c 1.28x); ..."); the logs stay in the folder it names.
# Without a GPU it says so and exits 0.
#
# Environment: MC_BIN (build/rel/megatron-c, built if missing), PYTHON (python3: the interpreter
# with torch for the peers), MODELS (or the arguments), BENCH_IMPLS (megatron-c megatron-c-local
# eager compile llmc), ACCUM, ITERS, BENCH_TRIES, BENCH_RUN_TIMEOUT, BENCH_BUDGET, PEAK_TFLOPS, MBS_124M /
# MBS_350M / MBS_1_3B / MBS_2_7B (micro batch lists), BENCH_LOGS (the logs' folder, made if
# missing; default a new /tmp/mc-bench.* folder), LLMC_DIR (a copy of karpathy/llm.c:
# train_gpt2.cu and llmc/, for the llm.c peer). Rehearsals of this script's plumbing on tiny
# models (test/integration/test_gpu_scripts.sh): BENCH_DEVICE=emu (megatron-c --device cuda on the
# emulated device of the tests, MC_EMU_BUILD/megatron-c, default build/emu; the PyTorch peer on
# the CPU) and BENCH_SMOKE=1 (the CPU backend, torch on the CPU).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
: "${PYTHON:=python3}"
[ $# -gt 0 ] && MODELS="$*"
: "${MODELS:=124M 350M 1.3B 2.7B}"
: "${BENCH_IMPLS:=megatron-c megatron-c-local eager compile llmc}"
: "${ACCUM:=4}" "${ITERS:=20}" "${PEAK_TFLOPS:=989}" "${BENCH_TRIES:=2}"
: "${BENCH_RUN_TIMEOUT:=180}" "${BENCH_BUDGET:=540}"
LOG_INTERVAL=10
BENCH_DEVICE=${BENCH_DEVICE:-cuda}
[ "${BENCH_SMOKE:-0}" = 1 ] && BENCH_DEVICE=cpu
case $BENCH_DEVICE in
cuda) : "${MC_BIN:=$ROOT/build/rel/megatron-c}" ;;
emu) MC_BIN=${MC_EMU_BUILD:-$ROOT/build/emu}/megatron-c ;;
cpu) : "${MC_BIN:=$ROOT/build/rel/megatron-c}" ;;
*) echo "bench.sh: BENCH_DEVICE is cuda (the default), emu or cpu, not '$BENCH_DEVICE'" >&2; exit 2 ;;
esac
# the logs' folder (not OUT: a caller's variable of that name, e.g. the device tool's, is left alone)
if [ -n "${BENCH_LOGS:-}" ]; then LOGS=$BENCH_LOGS; mkdir -p "$LOGS" || exit 1; else LOGS=$(mktemp -d /tmp/mc-bench.XXXXXX); fi

if [ "$BENCH_DEVICE" = cuda ] && [ "$("$ROOT/scripts/visible-gpus.sh")" -eq 0 ]; then
    echo "bench.sh: no GPU visible (nvidia-smi -L lists none, or CUDA_VISIBLE_DEVICES hides them); nothing measured"
    [ -n "${BENCH_LOGS:-}" ] || rmdir "$LOGS"
    exit 0
fi
if [ ! -x "$MC_BIN" ]; then
    [ "$BENCH_DEVICE" = emu ] && { echo "bench.sh: no $MC_BIN (make EMU=1 emu-tests)"; exit 1; }
    make -j"$(nproc)" WERROR=1 NVCC_WERROR=0 megatron-c >"$LOGS/build.log" 2>&1 || { echo "bench.sh: build failed, see $LOGS/build.log"; exit 1; }
fi
T0=$(date +%s)

# name: layers hidden heads seq, and micro batches to try
declare -A SHAPE MBS
SHAPE[124M]="12 768 12 1024";  MBS[124M]=${MBS_124M:-32 16 8 4}
SHAPE[350M]="24 1024 16 1024"; MBS[350M]=${MBS_350M:-16 8 4 2}
SHAPE[1.3B]="24 2048 16 2048"; MBS[1.3B]=${MBS_1_3B:-8 4 2 1}
SHAPE[2.7B]="32 2560 32 2048"; MBS[2.7B]=${MBS_2_7B:-4 2 1}
DEVICE=cuda VOCAB=50257 GPU=1
if [ "$BENCH_DEVICE" != cuda ]; then # the plumbing only: tiny shapes, on the CPU or the emulated device
    SHAPE[124M]="2 64 4 64"; MBS[124M]="4 2"
    SHAPE[350M]="2 96 4 64"; MBS[350M]="2"
    DEVICE=cpu VOCAB=1000 ITERS=12 LOG_INTERVAL=4 GPU=0
    if [ "$BENCH_DEVICE" = emu ]; then # ~1 s an emulated iteration at most
        SHAPE[124M]="2 32 4 32"; MBS[124M]="2 1"
        SHAPE[350M]="2 48 6 32"; MBS[350M]="1" # head dim 8: cuDNN takes it
        DEVICE=cuda VOCAB=200 ITERS=8 ACCUM=2
    fi
    MODELS=${MODELS/1.3B/}; MODELS=${MODELS/2.7B/}
fi
PEER_DEVICE=$([ $GPU = 1 ] && echo cuda || echo cpu)

left() { echo $((T0 + BENCH_BUDGET - $(date +%s))); }
limit() { # seconds the next run may take: BENCH_RUN_TIMEOUT, or what the budget has left less 20 s
    local l=$(($(left) - 20))
    [ "$l" -gt "$BENCH_RUN_TIMEOUT" ] && l=$BENCH_RUN_TIMEOUT
    [ "$l" -gt 0 ] && echo "$l" || echo 0
}
why_failed() { # rc limit stderr-file: one phrase for a run that did not give a number
    case $1 in
    124 | 137) echo "cut at its limit of $2 s" ;;
    *) echo "exit status $1: $(grep -v '^\s*$' "$3" | tail -1 | cut -c1-160)" ;;
    esac
}
NO_TIME="not started: BENCH_BUDGET ($BENCH_BUDGET s) spent"

# Peak GPU memory of a command, from nvidia-smi every 200 ms, minus what was in use before.
GPU_INDEX=${CUDA_VISIBLE_DEVICES:-0}
GPU_INDEX=${GPU_INDEX%%,*}
mem_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i "$GPU_INDEX" 2>/dev/null | head -1; }
with_peak_memory() { # file command...: runs the command; the peak in MiB goes to file
    local file=$1
    shift
    if [ $GPU != 1 ]; then
        "$@"
        local rc=$?
        echo "-" >"$file"
        return $rc
    fi
    local base
    base=$(mem_used)
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i "$GPU_INDEX" -lms 200 >"$file.samples" 2>/dev/null &
    local sampler=$!
    "$@"
    local rc=$?
    kill "$sampler" 2>/dev/null
    wait "$sampler" 2>/dev/null
    sort -n "$file.samples" | tail -1 | awk -v b="${base:-0}" '{ printf "%d\n", $1 - b }' >"$file"
    return $rc
}

# Each runner prints "ms tflops peak_mib [allocated_gib]", or nothing with the reason in $log.why.
run_mc() { # model mbs attention-backend (auto: logs mc-*, local: mclocal-*)
    local m=$1 mbs=$2 attn=$3 L H A S l rc
    read -r L H A S <<<"${SHAPE[$m]}"
    local log=$LOGS/mc$([ "$attn" = auto ] || echo "$attn")-$m-mbs$mbs
    l=$(limit)
    [ "$l" -gt 0 ] || { echo "$NO_TIME" >"$log.why"; return 0; }
    local args=(--bf16 --mock-data --vocab-size $VOCAB \
        --num-layers "$L" --hidden-size "$H" --num-attention-heads "$A" --seq-length "$S" \
        --max-position-embeddings "$S" --micro-batch-size "$mbs" --global-batch-size $((mbs * ACCUM)) \
        --train-iters "$ITERS" --log-interval "$LOG_INTERVAL" --eval-iters 0 --eval-interval 1000000 \
        --lr 6e-4 --min-lr 6e-5 --lr-decay-style cosine --lr-warmup-iters 2 --weight-decay 0.1 \
        --adam-beta1 0.9 --adam-beta2 0.95 --clip-grad 1.0 --hidden-dropout 0 --attention-dropout 0 \
        --attention-backend "$attn")
    # megatron-c plan's prediction of the same step on this GPU, beside the measurement
    "$MC_BIN" plan --num-gpus 1 --gpu "$PLAN_GPU" "${args[@]}" >"$log.plan" 2>&1
    with_peak_memory "$log.peak" timeout -k 10 "$l" "$MC_BIN" --device "$DEVICE" "${args[@]}" \
        --log-throughput >"$log" 2>"$log.err"
    rc=$?
    [ $rc -eq 0 ] || { why_failed $rc "$l" "$log.err" >"$log.why"; return 0; }
    local line
    line=$(grep " iteration *$ITERS/" "$log" | tail -1)
    local ms tf
    ms=$(sed -nE 's/.*elapsed time per iteration \(ms\): ([0-9.]+).*/\1/p' <<<"$line")
    tf=$(sed -nE 's/.*throughput per GPU \(TFLOP\/s\/GPU\): ([0-9.]+).*/\1/p' <<<"$line")
    if [ -n "$ms" ] && [ -n "$tf" ]; then echo "$ms $tf $(cat "$log.peak")"; else echo "no iteration $ITERS line with a throughput" >"$log.why"; fi
}

# The PyTorch peer (mode eager or compile).
run_torch() { # model mbs mode
    local m=$1 mbs=$2 mode=$3 L H A S l rc
    read -r L H A S <<<"${SHAPE[$m]}"
    local log=$LOGS/torch-$mode-$m-mbs$mbs
    local vocab=$(((VOCAB + 127) / 128 * 128))
    l=$(limit)
    [ "$l" -gt 0 ] || { echo "$NO_TIME" >"$log.why"; return 0; }
    with_peak_memory "$log.peak" timeout -k 10 "$l" "$PYTHON" "$ROOT/bench/gpt_torch.py" --device "$PEER_DEVICE" --mode "$mode" \
        --layers "$L" --hidden "$H" --heads "$A" --seq "$S" --vocab "$vocab" --micro-batch "$mbs" \
        --global-batch $((mbs * ACCUM)) --warmup "$LOG_INTERVAL" --iters $((ITERS - LOG_INTERVAL)) \
        --peak-tflops "$PEAK_TFLOPS" >"$log" 2>"$log.err"
    rc=$?
    [ $rc -eq 0 ] || { why_failed $rc "$l" "$log.err" >"$log.why"; return 0; }
    "$PYTHON" - "$log" "$(cat "$log.peak")" <<'EOF'
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print("%.3f %.6f %s %s" % (r["ms_per_iter"], r["tflops"], sys.argv[2], "%.2f" % r["peak_gib"] if "peak_gib" in r else "-"))
EOF
}

# llm.c (karpathy/llm.c's train_gpt2.cu) when LLMC_DIR names a copy of it: built into the logs'
# folder with nvcc (two adjustments to the copy: CUDA 13's cudaMemAdvise takes a cudaMemLocation,
# and NVML is linked from the driver's libnvidia-ml.so.1; reused by later calls into the same
# folder), run from scratch on random tokens in its file format, no recomputation (-r 0), the
# same steps, micro batches and accumulation. Its optimizer state falling back to managed (host)
# memory counts as not fitting.
declare -A LLMC_MODEL=([124M]=gpt2:d12 [350M]=gpt2:d24 [1.3B]=gpt3:c2048 [2.7B]=gpt3:c2560)
build_llmc() { # prints why it cannot run; nothing when it is ready
    local b=$LOGS/llmc nvml cc nvcc_major
    [ -x "$b/train_gpt2cu" ] && [ -s "$b/tokens.bin" ] && return
    mkdir -p "$b/nvml"
    cp -r "$LLMC_DIR/train_gpt2.cu" "$LLMC_DIR/llmc" "$b/" 2>/dev/null || { echo "cannot copy train_gpt2.cu and llmc/ from $LLMC_DIR"; return; }
    nvcc_major=$(nvcc --version 2>/dev/null | sed -nE 's/.*release ([0-9]+)\..*/\1/p')
    if [ "${nvcc_major:-0}" -ge 13 ]; then
        sed -i 's/cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)/cudaMemAdviseSetPreferredLocation, cudaMemLocation{cudaMemLocationTypeHost, 0})/' \
            "$b/llmc/cuda_utils.cuh"
    fi
    # NVML (llm.c uses it when nvml.h exists) from the driver, which ships no unversioned link
    local nvml_link=()
    nvml=$(ldconfig -p 2>/dev/null | awk '/libnvidia-ml\.so\.1 /{ print $NF; exit }')
    [ -n "$nvml" ] && ln -sf "$nvml" "$b/nvml/libnvidia-ml.so" && nvml_link=(-L"$b/nvml" -lnvidia-ml)
    cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader -i "$GPU_INDEX" 2>/dev/null | head -1 | tr -d .)
    (cd "$b" && timeout 300 nvcc --threads=0 -t=0 --use_fast_math -std=c++17 -O3 -gencode "arch=compute_${cc:-90},code=sm_${cc:-90}" \
        -DENABLE_BF16 train_gpt2.cu -lcublas -lcublasLt "${nvml_link[@]}" -o train_gpt2cu) >"$b/build.log" 2>&1 ||
        { echo "llm.c did not build (see $b/build.log)"; return; }
    # 256 int32 of header (magic 20240520, version 1, token count), then the tokens as uint16
    "$PYTHON" - "$b/tokens.bin" <<'EOF' || echo "cannot write llm.c's token file"
import sys
import numpy as np
n = 1 << 22
h = np.zeros(256, np.int32)
h[:3] = (20240520, 1, n)
with open(sys.argv[1], "wb") as f:
    f.write(h.tobytes())
    f.write(np.random.default_rng(0).integers(0, 50257, n, dtype=np.uint16).tobytes())
EOF
}

run_llmc() { # model mbs
    local m=$1 mbs=$2 L H A S b=$LOGS/llmc l rc
    read -r L H A S <<<"${SHAPE[$m]}"
    local log=$LOGS/llmc-$m-mbs$mbs
    l=$(limit)
    [ "$l" -gt 0 ] || { echo "$NO_TIME" >"$log.why"; return 0; }
    with_peak_memory "$log.peak" timeout -k 10 "$l" "$b/train_gpt2cu" -i "$b/tokens.bin" -j "$b/tokens.bin" -e "${LLMC_MODEL[$m]}" \
        -b "$mbs" -t "$S" -d $((mbs * S * ACCUM)) -x "$ITERS" -v 1000000 -m 1 -s 0 -h 0 -n 0 -r 0 -l 6e-4 -u 2 \
        -c 0.1 >"$log" 2>"$log.err"
    rc=$?
    [ $rc -eq 0 ] || { why_failed $rc "$l" "$log.err" >"$log.why"; return 0; }
    grep -q 'Fell back to cudaMallocManaged' "$log" && { echo "optimizer state fell back to managed memory" >"$log.why"; return 0; }
    local ms flops
    ms=$(grep -E '^step +[0-9]+/' "$log" | tail -n "$LOG_INTERVAL" | sed -nE 's/.*\| ([0-9.]+) ms \|.*/\1/p' |
        awk '{ s += $1; n++ } END { if (n) printf "%.3f", s / n }')
    [ -n "$ms" ] || { echo "no step times in its log" >"$log.why"; return 0; }
    flops=$("$PYTHON" "$ROOT/bench/gpt_torch.py" --print-flops --layers "$L" --hidden "$H" --heads "$A" --seq "$S" \
        --vocab 50304 --global-batch $((mbs * ACCUM))) || return 0
    awk -v f="$flops" -v ms="$ms" -v p="$(cat "$log.peak")" 'BEGIN { printf "%s %.6f %s\n", ms, f / (ms / 1000) / 1e12, p }'
}

# The fastest micro batch (per token) of the first BENCH_TRIES of a list that ran: "mbs ms tflops
# peak ...", or "! why" (each micro batch's reason) when none ran.
best() { # log-prefix runner model args...
    local prefix=$1 runner=$2 m=$3
    shift 3
    local best_line="" best_ms="" mbs r ran=0 whys=""
    for mbs in ${MBS[$m]}; do
        rm -f "$LOGS/$prefix-$m-mbs$mbs.why"
        r=$($runner "$m" "$mbs" "$@")
        if [ -z "$r" ]; then
            whys="$whys${whys:+; }micro batch $mbs: $(cat "$LOGS/$prefix-$m-mbs$mbs.why" 2>/dev/null || echo "no result")"
            continue
        fi
        local ms=${r%% *}
        # time per token: ms / (mbs * ACCUM * seq) compares micro batches fairly
        if [ -z "$best_ms" ] || awk -v a="$ms" -v am="$mbs" -v b="$best_ms" -v bm="${best_line%% *}" \
            'BEGIN { exit !(a / am < b / bm) }'; then
            best_ms=$ms best_line="$mbs $r"
        fi
        ran=$((ran + 1))
        [ "$ran" -ge "$BENCH_TRIES" ] && break
    done
    if [ -n "$best_line" ]; then echo "$best_line"; else echo "! $whys"; fi
}

# megatron-c plan's tokens/s for the micro batch of a megatron-c result ("" when none).
planned_tokens() { # log-prefix model result
    case $3 in "! "* | "- "*) return ;; esac
    sed -nE 's/^> throughput: ([0-9]+) tokens\/s.*/\1/p' "$LOGS/$1-$2-mbs${3%% *}.plan" 2>/dev/null
}

tokens_per_s() { # model result: tokens per second of a "mbs ms ..." result
    local L H A S
    read -r L H A S <<<"${SHAPE[$1]}"
    awk -v r="$2" -v acc="$ACCUM" -v S="$S" 'BEGIN { split(r, a, " "); printf "%.0f", a[1] * acc * S / (a[2] / 1000) }'
}

row() { # model impl result plan's-tokens/s
    local m=$1 impl=$2 r=$3 planned=${4:--} L H A S
    read -r L H A S <<<"${SHAPE[$m]}"
    case $r in
    "! "*) echo "| $m ($L x $H, seq $S) | $impl | - | did not run (${r#! }; logs in $LOGS) | | | | |"; return ;;
    "- "*) echo "| $m | $impl | - | ${r#- } | | | | |"; return ;;
    esac
    read -r mbs ms tf peak alloc <<<"$r"
    awk -v m="$m" -v L="$L" -v H="$H" -v S="$S" -v impl="$impl" -v mbs="$mbs" -v ms="$ms" -v tf="$tf" \
        -v peak="$peak" -v alloc="${alloc:--}" -v acc="$ACCUM" -v pk="$PEAK_TFLOPS" -v plan="${planned:--}" 'BEGIN {
        mem = peak == "-" ? "-" : sprintf("%.1f GiB", peak / 1024)
        if (alloc != "-") mem = mem sprintf(" (torch: %.1f GiB allocated)", alloc)
        printf "| %s (%d x %d, seq %d) | %s | %d | %.0f | %.1f | %.1f%% | %s | %s |\n", m, L, H, S, impl, mbs,
               mbs * acc * S / (ms / 1000), tf, 100 * tf / pk, mem, plan }'
}

PEER_WHY=""
if [ $GPU != 1 ]; then
    "$PYTHON" -c 'import torch' 2>/dev/null || PEER_WHY="$PYTHON cannot import torch"
else
    PEER_WHY=$("$PYTHON" - <<'EOF' 2>&1
import sys
try:
    import torch
except Exception as e:
    print("%s cannot import torch (%s)" % (sys.executable, e)); sys.exit(0)
if not torch.cuda.is_available():
    print("torch %s in %s sees no CUDA device" % (torch.__version__, sys.executable))
elif not hasattr(torch, "compile"):
    print("torch %s has no torch.compile (needs 2.0 or later)" % torch.__version__)
EOF
)
fi
MODES="eager compile"
[ $GPU != 1 ] && MODES=eager # torch.compile on the CPU wants a C++ toolchain and minutes
selected() { [[ " $BENCH_IMPLS " == *" $1 "* ]]; }
LLMC_WHY=""
if [ $GPU != 1 ]; then LLMC_WHY="llm.c needs a GPU (BENCH_DEVICE=$BENCH_DEVICE)"
elif ! selected llmc; then :
elif [ -z "${LLMC_DIR:-}" ]; then LLMC_WHY="LLMC_DIR does not name a copy of karpathy/llm.c"
elif [ ! -f "$LLMC_DIR/train_gpt2.cu" ]; then LLMC_WHY="no train_gpt2.cu in LLMC_DIR=$LLMC_DIR"
else LLMC_WHY=$(build_llmc); fi

# Measures model m with the selected implementations into $LOGS/<m>.<impl>.result (kept for
# later calls), then prints its rows and writes its summary from every result there.
IMPL_NAMES=(megatron-c megatron-c-local eager compile llmc)
declare -A IMPL_LABEL=([megatron-c]=megatron-c [megatron-c-local]="megatron-c --attention-backend local"
                       [eager]="PyTorch eager" [compile]="PyTorch compile" [llmc]=llm.c)
declare -A IMPL_LOG=([megatron-c]=mc [megatron-c-local]=mclocal)
measure() { # model
    local m=$1 t impl r
    t=$(date +%s)
    for impl in "${IMPL_NAMES[@]}"; do
        selected "$impl" || continue
        case $impl in
        megatron-c) r=$(best mc run_mc "$m" auto) ;;
        megatron-c-local) r=$(best mclocal run_mc "$m" local) ;;
        eager | compile)
            if [[ " $MODES " != *" $impl "* ]]; then r="- not run: torch.compile is measured on GPUs only"
            elif [ -n "$PEER_WHY" ]; then r="- the peer could not be run: $PEER_WHY"
            else r=$(best "torch-$impl" run_torch "$m" "$impl"); fi ;;
        llmc)
            if [ -n "$LLMC_WHY" ]; then r="- not run: $LLMC_WHY"; else r=$(best llmc run_llmc "$m"); fi ;;
        esac
        echo "$r" >"$LOGS/$m.$impl.result"
    done
    local mc="" line="bench $m:" tok planned
    for impl in "${IMPL_NAMES[@]}"; do
        r=$(cat "$LOGS/$m.$impl.result" 2>/dev/null) || r="- not measured (BENCH_IMPLS)"
        planned=-
        case $impl in megatron-c*) planned=$(planned_tokens "${IMPL_LOG[$impl]}" "$m" "$r") ;; esac
        row "$m" "${IMPL_LABEL[$impl]}" "$r" "$planned"
        case $r in
        "! "*) line="$line ${IMPL_LABEL[$impl]}: did not run (${r#! });" ;;
        "- "*) line="$line ${IMPL_LABEL[$impl]}: ${r#- };" ;;
        *)
            tok=$(tokens_per_s "$m" "$r")
            if [ "$impl" = megatron-c ]; then
                mc=$tok line="$line megatron-c $tok tokens/s (micro batch ${r%% *}; megatron-c plan predicted ${planned:-nothing} for $PLAN_GPU);"
            elif [ "$impl" = megatron-c-local ]; then
                line="$line ${IMPL_LABEL[$impl]} $tok tokens/s (micro batch ${r%% *}; megatron-c plan predicted ${planned:-nothing}$([ -n "$mc" ] && awk -v a="$mc" -v b="$tok" 'BEGIN { printf "; auto %.2fx local", a / b }'));"
            else
                line="$line ${IMPL_LABEL[$impl]} $tok tokens/s$([ -n "$mc" ] && awk -v a="$mc" -v b="$tok" 'BEGIN { printf " (megatron-c %.2fx)", a / b }');"
            fi ;;
        esac
    done
    echo "${line%;} ($(($(date +%s) - t)) s)" >"$LOGS/$m.summary"
}

# the planner's GPU for this one (megatron-c plan --gpu)
case $(nvidia-smi --query-gpu=name --format=csv,noheader -i "${GPU_INDEX:-0}" 2>/dev/null) in
*H200*) PLAN_GPU=h200 ;;
*A100*) PLAN_GPU=a100 ;;
*) PLAN_GPU=h100 ;;
esac
{
    case $BENCH_DEVICE in
    cuda) echo "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader -i "$GPU_INDEX")" ;;
    emu) echo "GPU: none (BENCH_DEVICE=emu: the emulated device of the tests, tiny shapes; the numbers are the plumbing's)" ;;
    cpu) echo "GPU: none (BENCH_SMOKE: CPU backend)" ;;
    esac
    echo "megatron-c: $("$MC_BIN" --version | tr '\n' ' ')"
    [ -z "$PEER_WHY" ] && echo "PyTorch peer: torch $("$PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null) ($PEER_DEVICE)"
    [ -z "$LLMC_WHY" ] && selected llmc && echo "llm.c peer: $LLMC_DIR $(git -C "$LLMC_DIR" rev-parse --short HEAD 2>/dev/null || cat "$LLMC_DIR/REVISION" 2>/dev/null)"
    echo "bf16, mock data, $ACCUM micro batches per step, the fastest of the first $BENCH_TRIES micro batches that ran; MFU against $PEAK_TFLOPS TFLOP/s"
    echo
    echo "| model | implementation | micro batch | tokens/s | TFLOP/s | MFU | peak memory | plan's tokens/s |"
    echo "|---|---|---|---|---|---|---|---|"
    for m in $MODELS; do
        [ -n "${SHAPE[$m]:-}" ] || { echo "| $m | - | - | unknown model (124M, 350M, 1.3B, 2.7B) | | | | |"; continue; }
        measure "$m"
    done
    echo
    for m in $MODELS; do [ -f "$LOGS/$m.summary" ] && cat "$LOGS/$m.summary"; done
    echo "logs: $LOGS"
} | tee "$LOGS/table.md"
