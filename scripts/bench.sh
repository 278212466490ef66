#!/usr/bin/env bash
# Training throughput on one GPU (issue 7, point 5): GPT-2 124M, 350M, 1.3B and 2.7B in bf16 on
# mock data, megatron-c against PyTorch peers (bench/gpt_torch.py, eager and torch.compile with
# flash attention through scaled_dot_product_attention) and llm.c (LLMC_DIR) measured in the
# same run.
#
#   scripts/bench.sh                 all four models
#   MODELS="124M 350M" scripts/bench.sh
#
# For each model and implementation, micro batches from a list are tried (largest first) and the
# fastest run is kept; a micro batch that does not fit (megatron-c's memory plan refuses it,
# PyTorch runs out of memory) is skipped. A step is ACCUM (4) micro batches. Reported:
# tokens/s; TFLOP/s by Megatron's formula (megatron-c's --log-throughput; the peer computes the
# same formula); MFU against PEAK_TFLOPS (989: H100 SXM dense bf16); peak GPU memory, sampled
# with nvidia-smi during the run (the whole process: context, workspaces, allocator slack),
# and for the peer also torch's own max_memory_allocated. megatron-c's number is the average of
# the last LOG_INTERVAL (10) of ITERS (30) iterations; the peer times ITERS - 10 steps after 10
# warm-up steps (torch.compile compiles there).
#
# Prints a markdown table ready for docs/PERF.md; the logs stay in the folder it names. Without
# a GPU it says so and exits 0. Environment: MC_BIN (build/rel/megatron-c, built if missing),
# PYTHON (python3: the interpreter with torch for the peers), MODELS, ACCUM, ITERS,
# PEAK_TFLOPS, MBS_124M / MBS_350M / MBS_1_3B / MBS_2_7B (micro batch lists), BENCH_LOGS (the
# logs' folder, made if missing; default a new /tmp/mc-bench.* folder),
# LLMC_DIR (a copy of karpathy/llm.c: train_gpt2.cu and llmc/, for the llm.c peer),
# BENCH_SMOKE=1 (tiny models on the CPU backend and torch on the CPU: checks this script's own
# plumbing, test/integration/test_gpu_scripts.sh).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
: "${MC_BIN:=$ROOT/build/rel/megatron-c}"
: "${PYTHON:=python3}"
: "${MODELS:=124M 350M 1.3B 2.7B}"
: "${ACCUM:=4}" "${ITERS:=30}" "${PEAK_TFLOPS:=989}"
LOG_INTERVAL=10
SMOKE=${BENCH_SMOKE:-0}
# the logs' folder (not OUT: a caller's variable of that name, e.g. the device tool's, is left alone)
if [ -n "${BENCH_LOGS:-}" ]; then LOGS=$BENCH_LOGS; mkdir -p "$LOGS" || exit 1; else LOGS=$(mktemp -d /tmp/mc-bench.XXXXXX); fi

if [ "$SMOKE" != 1 ] && [ "$("$ROOT/scripts/visible-gpus.sh")" -eq 0 ]; then
    echo "bench.sh: no GPU visible (nvidia-smi -L lists none, or CUDA_VISIBLE_DEVICES hides them); nothing measured"
    [ -n "${BENCH_LOGS:-}" ] || rmdir "$LOGS"
    exit 0
fi
if [ ! -x "$MC_BIN" ]; then
    make -j"$(nproc)" WERROR=1 megatron-c >"$LOGS/build.log" 2>&1 || { echo "bench.sh: build failed, see $LOGS/build.log"; exit 1; }
fi

# name: layers hidden heads seq, and micro batches to try
declare -A SHAPE MBS
SHAPE[124M]="12 768 12 1024";  MBS[124M]=${MBS_124M:-32 16 8 4}
SHAPE[350M]="24 1024 16 1024"; MBS[350M]=${MBS_350M:-16 8 4 2}
SHAPE[1.3B]="24 2048 16 2048"; MBS[1.3B]=${MBS_1_3B:-8 4 2 1}
SHAPE[2.7B]="32 2560 32 2048"; MBS[2.7B]=${MBS_2_7B:-4 2 1}
DEVICE=cuda VOCAB=50257
if [ "$SMOKE" = 1 ]; then # the plumbing only: tiny shapes on the CPU
    SHAPE[124M]="2 64 4 64"; MBS[124M]="4 2"
    SHAPE[350M]="2 96 4 64"; MBS[350M]="2"
    DEVICE=cpu VOCAB=1000 ITERS=12 LOG_INTERVAL=4
    MODELS=${MODELS/1.3B/}; MODELS=${MODELS/2.7B/}
fi

# Peak GPU memory of a command, from nvidia-smi every 200 ms, minus what was in use before.
GPU_INDEX=${CUDA_VISIBLE_DEVICES:-0}
GPU_INDEX=${GPU_INDEX%%,*}
mem_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i "$GPU_INDEX" 2>/dev/null | head -1; }
with_peak_memory() { # file command...: runs the command; the peak in MiB goes to file
    local file=$1
    shift
    if [ "$DEVICE" != cuda ]; then
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

# megatron-c on one model and micro batch: "ms tflops peak_mib" or nothing if it did not run.
run_mc() { # model mbs
    local m=$1 mbs=$2 L H A S
    read -r L H A S <<<"${SHAPE[$m]}"
    local log=$LOGS/mc-$m-mbs$mbs
    with_peak_memory "$log.peak" "$MC_BIN" --device "$DEVICE" --bf16 --mock-data --vocab-size $VOCAB \
        --num-layers "$L" --hidden-size "$H" --num-attention-heads "$A" --seq-length "$S" \
        --max-position-embeddings "$S" --micro-batch-size "$mbs" --global-batch-size $((mbs * ACCUM)) \
        --train-iters "$ITERS" --log-interval "$LOG_INTERVAL" --eval-iters 0 --eval-interval 1000000 \
        --lr 6e-4 --min-lr 6e-5 --lr-decay-style cosine --lr-warmup-iters 2 --weight-decay 0.1 \
        --adam-beta1 0.9 --adam-beta2 0.95 --clip-grad 1.0 --hidden-dropout 0 --attention-dropout 0 \
        --log-throughput >"$log" 2>"$log.err" || return 0
    local line
    line=$(grep " iteration *$ITERS/" "$log" | tail -1)
    [ -n "$line" ] || return 0
    local ms tf
    ms=$(sed -nE 's/.*elapsed time per iteration \(ms\): ([0-9.]+).*/\1/p' <<<"$line")
    tf=$(sed -nE 's/.*throughput per GPU \(TFLOP\/s\/GPU\): ([0-9.]+).*/\1/p' <<<"$line")
    [ -n "$ms" ] && [ -n "$tf" ] && echo "$ms $tf $(cat "$log.peak")"
}

# The PyTorch peer: "ms tflops peak_mib allocated_gib" or nothing.
run_torch() { # model mbs mode
    local m=$1 mbs=$2 mode=$3 L H A S
    read -r L H A S <<<"${SHAPE[$m]}"
    local log=$LOGS/torch-$mode-$m-mbs$mbs
    local vocab=$(((VOCAB + 127) / 128 * 128))
    with_peak_memory "$log.peak" "$PYTHON" "$ROOT/bench/gpt_torch.py" --device "$DEVICE" --mode "$mode" \
        --layers "$L" --hidden "$H" --heads "$A" --seq "$S" --vocab "$vocab" --micro-batch "$mbs" \
        --global-batch $((mbs * ACCUM)) --warmup "$LOG_INTERVAL" --iters $((ITERS - LOG_INTERVAL)) \
        --peak-tflops "$PEAK_TFLOPS" >"$log" 2>"$log.err" || return 0
    "$PYTHON" - "$log" "$(cat "$log.peak")" <<'EOF'
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print("%.3f %.6f %s %s" % (r["ms_per_iter"], r["tflops"], sys.argv[2], "%.2f" % r["peak_gib"] if "peak_gib" in r else "-"))
EOF
}

# llm.c (karpathy/llm.c's train_gpt2.cu) when LLMC_DIR names a copy of it: built into the logs'
# folder with nvcc (two adjustments to the copy: CUDA 13's cudaMemAdvise takes a cudaMemLocation,
# and NVML is linked from the driver's libnvidia-ml.so.1), run from scratch on random tokens in
# its file format, no recomputation (-r 0), the same steps, micro batches and accumulation. Its
# optimizer state falling back to managed (host) memory counts as not fitting.
declare -A LLMC_MODEL=([124M]=gpt2:d12 [350M]=gpt2:d24 [1.3B]=gpt3:c2048 [2.7B]=gpt3:c2560)
build_llmc() { # prints why it cannot run; nothing when it is ready
    local b=$LOGS/llmc nvml cc nvcc_major
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
    (cd "$b" && nvcc --threads=0 -t=0 --use_fast_math -std=c++17 -O3 -gencode "arch=compute_${cc:-90},code=sm_${cc:-90}" \
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

run_llmc() { # model mbs: "ms tflops peak_mib" or nothing
    local m=$1 mbs=$2 L H A S b=$LOGS/llmc
    read -r L H A S <<<"${SHAPE[$m]}"
    local log=$LOGS/llmc-$m-mbs$mbs
    with_peak_memory "$log.peak" "$b/train_gpt2cu" -i "$b/tokens.bin" -j "$b/tokens.bin" -e "${LLMC_MODEL[$m]}" \
        -b "$mbs" -t "$S" -d $((mbs * S * ACCUM)) -x "$ITERS" -v 1000000 -m 1 -s 0 -h 0 -n 0 -r 0 -l 6e-4 -u 2 \
        -c 0.1 >"$log" 2>"$log.err" || return 0
    grep -q 'Fell back to cudaMallocManaged' "$log" && return 0
    local ms flops
    ms=$(grep -E '^step +[0-9]+/' "$log" | tail -n "$LOG_INTERVAL" | sed -nE 's/.*\| ([0-9.]+) ms \|.*/\1/p' |
        awk '{ s += $1; n++ } END { if (n) printf "%.3f", s / n }')
    [ -n "$ms" ] || return 0
    flops=$("$PYTHON" "$ROOT/bench/gpt_torch.py" --print-flops --layers "$L" --hidden "$H" --heads "$A" --seq "$S" \
        --vocab 50304 --global-batch $((mbs * ACCUM))) || return 0
    awk -v f="$flops" -v ms="$ms" -v p="$(cat "$log.peak")" 'BEGIN { printf "%s %.6f %s\n", ms, f / (ms / 1000) / 1e12, p }'
}

# The fastest micro batch of a list: "mbs ms tflops peak ..." or nothing.
best() { # runner model args...
    local runner=$1 m=$2
    shift 2
    local best_line="" best_ms="" mbs r
    for mbs in ${MBS[$m]}; do
        r=$($runner "$m" "$mbs" "$@")
        [ -n "$r" ] || continue
        local ms=${r%% *}
        # time per token: ms / (mbs * ACCUM * seq) compares micro batches fairly
        if [ -z "$best_ms" ] || awk -v a="$ms" -v am="$mbs" -v b="$best_ms" -v bm="${best_line%% *}" \
            'BEGIN { exit !(a / am < b / bm) }'; then
            best_ms=$ms best_line="$mbs $r"
        fi
    done
    echo "$best_line"
}

row() { # model impl result
    local m=$1 impl=$2 r=$3 L H A S
    read -r L H A S <<<"${SHAPE[$m]}"
    if [ -z "$r" ]; then
        echo "| $m ($L x $H, seq $S) | $impl | - | did not run (no micro batch of ${MBS[$m]} fit or ran; logs in $LOGS) | | | |"
        return
    fi
    read -r mbs ms tf peak alloc <<<"$r"
    awk -v m="$m" -v L="$L" -v H="$H" -v S="$S" -v impl="$impl" -v mbs="$mbs" -v ms="$ms" -v tf="$tf" \
        -v peak="$peak" -v alloc="${alloc:--}" -v acc="$ACCUM" -v pk="$PEAK_TFLOPS" 'BEGIN {
        mem = peak == "-" ? "-" : sprintf("%.1f GiB", peak / 1024)
        if (alloc != "-") mem = mem sprintf(" (torch: %.1f GiB allocated)", alloc)
        printf "| %s (%d x %d, seq %d) | %s | %d | %.0f | %.1f | %.1f%% | %s |\n", m, L, H, S, impl, mbs,
               mbs * acc * S / (ms / 1000), tf, 100 * tf / pk, mem }'
}

PEER_WHY=""
if [ "$SMOKE" = 1 ]; then
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
[ "$SMOKE" = 1 ] && MODES=eager
if [ "$SMOKE" = 1 ]; then LLMC_WHY="llm.c needs a GPU (BENCH_SMOKE runs on the CPU)"
elif [ -z "${LLMC_DIR:-}" ]; then LLMC_WHY="LLMC_DIR does not name a copy of karpathy/llm.c"
elif [ ! -f "$LLMC_DIR/train_gpt2.cu" ]; then LLMC_WHY="no train_gpt2.cu in LLMC_DIR=$LLMC_DIR"
else LLMC_WHY=$(build_llmc); fi

{
    echo "GPU: $( [ "$DEVICE" = cuda ] && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader -i "$GPU_INDEX" || echo "none (BENCH_SMOKE: CPU backend)")"
    echo "megatron-c: $("$MC_BIN" --version | tr '\n' ' ')"
    [ -z "$PEER_WHY" ] && echo "PyTorch peer: torch $("$PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
    [ -z "$LLMC_WHY" ] && echo "llm.c peer: $LLMC_DIR $(git -C "$LLMC_DIR" rev-parse --short HEAD 2>/dev/null || cat "$LLMC_DIR/REVISION" 2>/dev/null)"
    echo "bf16, mock data, $ACCUM micro batches per step, the fastest micro batch of each list; MFU against $PEAK_TFLOPS TFLOP/s"
    echo
    echo "| model | implementation | micro batch | tokens/s | TFLOP/s | MFU | peak memory |"
    echo "|---|---|---|---|---|---|---|"
    for m in $MODELS; do
        [ -n "${SHAPE[$m]:-}" ] || { echo "| $m | - | - | unknown model (124M, 350M, 1.3B, 2.7B) | | | |"; continue; }
        row "$m" megatron-c "$(best run_mc "$m")"
        for mode in $MODES; do
            if [ -n "$PEER_WHY" ]; then
                echo "| $m | PyTorch $mode | - | the peer could not be run: $PEER_WHY | | | |"
            else
                row "$m" "PyTorch $mode" "$(best run_torch "$m" "$mode")"
            fi
        done
        if [ -n "$LLMC_WHY" ]; then
            echo "| $m | llm.c | - | not run: $LLMC_WHY | | | |"
        else
            row "$m" llm.c "$(best run_llmc "$m")"
        fi
    done
    echo
    echo "logs: $LOGS"
} | tee "$LOGS/table.md"
