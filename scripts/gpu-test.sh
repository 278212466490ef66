#!/usr/bin/env bash
# The CUDA backend's correctness on a machine with a GPU, in steps that each fit
# one call of the device tool (600 s):
#
#   scripts/gpu-test.sh [STEP]     STEP: build, ops, train, sanitizer, nccl, or all (the default:
#                                  every step in order, as one command)
#
#  build      make WERROR=1 NVCC_WERROR=0 of what the later steps run (build/rel: megatron-c, the GPU
#             op tests, test_comm_nccl_gpu). A newer nvcc's new warnings are not fatal there: they
#             are counted in the summary and listed in nvcc-warnings.log. Later steps use the build
#             as it is (MC_GPU_TEST_NO_BUILD=1 skips this one);
#  ops        every GPU op test (test_gpu_*: each CUDA op against the CPU op, cuDNN's fused
#             attention included: test_gpu_attention_cudnn); where the device exists a skipped op
#             test is a failure;
#  train      1. fp32: 24 iterations (dropout on) on the device give the CPU run's lm losses within
#                1e-4 relative. TF32 is off (NVIDIA_TF32_OVERRIDE=0): this compares fp32 with fp32;
#             2. bf16 on the device tracks the device's fp32 loss curve within 1% relative per
#                iteration. A bf16 value carries 8 significant bits (2^-9 = 0.2% relative rounding
#                per stored value); the loss averages thousands of tokens, so its own error stays
#                far below that, and 1% leaves room for 24 iterations of drift. The CPU backend's
#                bf16 tracks its fp32 by ~1e-4 over the same kind of run (test_mixed.sh);
#             3. fp16 (11 significant bits) with its dynamic loss scaler, from a scale of 4096 that
#                these gradients never overflow, tracks the fp32 curve within 1% too;
#             4. fp16 overflow: from a scale of 2^24 (hysteresis 1) the device skips the iterations
#                the CPU skips, with the same loss scales after each (the gradients' inf/NaN check
#                on the device), and the applied iterations' losses are within 1% of the CPU's
#                (with --attention-backend local, whose dropout masks are the CPU's);
#             5-7. tp 2 with sequence parallelism, pp 2 with virtual stages, and dp 2 with the
#                distributed optimizer and both overlaps, two ranks on one device
#                (--distributed-backend mpi: device buffers staged through host memory), give the
#                single-rank run's lm losses, grad norms and params norms (relative tolerances
#                LAYOUT_TOL_LOSS, default 1e-5, and LAYOUT_TOL_GRAD, default 1e-4, those of the CPU
#                layout tests: the layouts sum in another order);
#             8-10. the same layouts with --distributed-backend nccl, one GPU per rank, when two
#                GPUs are visible (else reported skipped);
#             11. the Llama block (grouped-query attention, SwiGLU, RoPE, RMSNorm, q/k layernorm,
#                untied, no biases) in fp32 on the device gives the CPU run's lm losses (as 1.);
#             12. its bf16 run on the device tracks its fp32 run within 1% (as 2.);
#                2., 3. and 12. run the project's attention (--attention-backend local), as the fp32
#                runs do, so that both draw the CPU's dropout masks (cuDNN's are its own);
#             13-17. cuDNN's fused attention, the default (--attention-backend auto), in bf16 with
#                attention dropout 0 (its dropout draws from cuDNN's generator, not the CPU's
#                Philox): the log names cuDNN; the GPT and the
#                Llama model give the CPU's bf16 lm losses within CUDNN_TOL (1e-2; 1e-3 emulated,
#                where the emulated cuDNN rounds as the CPU does but for P and dS rounded to bf16
#                before their products); tp 2 + SP, pp 2 with vpp and dp 2 with the distributed
#                optimizer give the single-rank cuDNN run's lm losses within 1e-4 (tp 2: 1e-3, its
#                row-parallel partial sums rounded to bf16: cudnn_layout_tol), grad norms 1e-2
#                and params norms 1e-3 (bf16 sums in the layouts' order: tp 2's grad norms move by
#                up to 0.4% emulated). MC_GPU_TEST_CUDNN_ITERS iterations (default 8);
#  sanitizer  compute-sanitizer memcheck of a short bf16 run (MC_GPU_TEST_SAN_ITERS, default 3,
#             iterations and an evaluation; one rank exercises every kernel) reports no error;
#  nccl       the NCCL communicator's device checks (test_comm_nccl_gpu: test/mpi/test_comm_mpi.c on
#             real CUDA and NCCL) with one rank, so one GPU runs real NCCL too.
#
# Prints TAP lines, then "gpu-test: N passed, M failed, K skipped" (for all: every step together);
# exits 1 if anything failed. Each step writes its logs and a one-line summary, <step>.summary
# ("gpu-test train: 7 passed, 0 failed, 3 skipped (96 s)"), into the logs' folder (all.summary
# too). A step ends within MC_GPU_TEST_BUDGET seconds (540 on a GPU, under the device tool's
# 600): every run is cut at what the step has left, and a check that finds no time left fails
# saying so, so a hang is reported inside the call instead of losing it.
# Without a GPU (none listed by nvidia-smi -L, or CUDA_VISIBLE_DEVICES empty or -1) every check
# is reported skipped and it exits 0.
#
# MC_GPU_TEST_DEVICE=emu rehearses every step on the emulated CUDA device of the tests (test/emu,
# one emulated H100, no nvidia-smi; the CPU does the work, slowly), so that only GPU facts can go
# wrong on the device machine: build is make EMU=1 WERROR=1 emu-tests (into MC_EMU_BUILD, default
# build/emu; SANITIZE=1 when it is build/emu-san); ops and train use that tree's programs (train on
# smaller shapes, fp32 against the CPU within 1e-5: the emulation computes as the CPU does);
# sanitizer runs the same short run built with ASan and UBSan instead (MC_EMU_SAN_BUILD, default
# build/emu-san, made first unless MC_GPU_TEST_NO_BUILD=1): no sanitizer report and exit 0; nccl
# is reported skipped (NCCL is not emulated).
#
# Environment: MC_BUILD (build/rel), MC_BIN ($MC_BUILD/megatron-c), MC_GPU_TEST_LOGS=DIR (the logs
# and summaries go there, kept; else a temporary folder, removed unless MC_GPU_TEST_KEEP=1),
# MC_GPU_TEST_TIMEOUT (seconds one run may take: 150 on a GPU, 900 emulated), MC_GPU_TEST_BUDGET
# (seconds a step may take: 540 on a GPU, 1800 emulated), MC_GPU_TEST_ONLY (train: the checks to
# run of fp32 bf16 fp16 fp16-overflow tp pp dp llama llama-bf16 cudnn cudnn-tp cudnn-pp cudnn-dp
# cudnn-llama; the others are reported skipped),
# MC_GPU_TEST_ITERS (train: iterations of the comparisons, default 24), MC_GPU_TEST_OPS (ops: the
# op tests to run, e.g. "gelu reduce"; default all), MC_GPU_TEST_NO_BUILD=1, MC_EMU_BUILD,
# MC_EMU_SAN_BUILD.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
STEPS=(build ops train sanitizer nccl)
STEP=${1:-all}
case " ${STEPS[*]} all " in
*" $STEP "*) ;;
*) echo "usage: scripts/gpu-test.sh [build|ops|train|sanitizer|nccl|all]" >&2; exit 2 ;;
esac
DEVICE=${MC_GPU_TEST_DEVICE:-cuda}
case $DEVICE in
cuda)
    : "${MC_BUILD:=$ROOT/build/rel}"
    : "${MC_BIN:=$MC_BUILD/megatron-c}"
    : "${MC_GPU_TEST_TIMEOUT:=150}" "${MC_GPU_TEST_BUDGET:=540}"
    GPUS=$("$ROOT/scripts/visible-gpus.sh")
    WHERE="the GPU" ;;
emu)
    # the emulated tree, whatever MC_BUILD says (test/run.sh exports the CPU build's)
    : "${MC_EMU_BUILD:=$ROOT/build/emu}"
    MC_BUILD=$MC_EMU_BUILD MC_BIN=$MC_EMU_BUILD/megatron-c
    case $MC_EMU_BUILD in
    *emu-san) : "${MC_EMU_SAN_BUILD:=$MC_EMU_BUILD}" ;;
    *) : "${MC_EMU_SAN_BUILD:=$ROOT/build/emu-san}" ;;
    esac
    : "${MC_GPU_TEST_TIMEOUT:=900}" "${MC_GPU_TEST_BUDGET:=1800}"
    GPUS=1 # one emulated device, hidden as a GPU would be
    case ${CUDA_VISIBLE_DEVICES-unset} in "" | -1*) GPUS=0 ;; esac
    WHERE="the emulated device" ;;
*)
    echo "gpu-test: MC_GPU_TEST_DEVICE is cuda (the default) or emu, not '$DEVICE'" >&2
    exit 2 ;;
esac
: "${LAYOUT_TOL_LOSS:=1e-5}" "${LAYOUT_TOL_GRAD:=1e-4}"
: "${MC_GPU_TEST_ONLY:=fp32 bf16 fp16 fp16-overflow tp pp dp llama llama-bf16 cudnn cudnn-tp cudnn-pp cudnn-dp cudnn-llama}"
: "${MC_GPU_TEST_ITERS:=24}" "${MC_GPU_TEST_CUDNN_ITERS:=8}"
: "${MC_GPU_TEST_SAN_ITERS:=3}"
if [ -n "${MC_GPU_TEST_LOGS:-}" ]; then
    LOGS=$MC_GPU_TEST_LOGS
    mkdir -p "$LOGS" || exit 1
    echo "# logs in $LOGS"
else
    LOGS=$(mktemp -d)
    if [ "${MC_GPU_TEST_KEEP:-0}" = 1 ]; then echo "# logs in $LOGS"; else trap 'rm -rf "$LOGS"' EXIT; fi
fi
[ "$DEVICE" = emu ] && echo "# MC_GPU_TEST_DEVICE=emu: rehearsing on the emulated device ($MC_BUILD)"

n=0 passed=0 failed=0 skipped=0
ok() { n=$((n + 1)) passed=$((passed + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)) failed=$((failed + 1)); echo "not ok $n - $*"; }
skip() { n=$((n + 1)) skipped=$((skipped + 1)); echo "ok $n - $1 # SKIP $2"; }
finish() {
    echo "1..$n"
    echo "gpu-test: $passed passed, $failed failed, $skipped skipped"
    [ "$failed" -eq 0 ]
    exit $?
}

# ---- the step's clock: each run gets what is left, less a margin for the rest of the step ----
step_begin() { # step
    STEP_NAME=$1 STEP_NOTE="" T0=$(date +%s)
    DEADLINE=$((T0 + MC_GPU_TEST_BUDGET)) P0=$passed F0=$failed S0=$skipped
    echo "# ---- $1 ----"
}
step_end() { # writes <step>.summary
    local line="gpu-test $STEP_NAME: $((passed - P0)) passed, $((failed - F0)) failed, $((skipped - S0)) skipped"
    line="$line ($(($(date +%s) - T0)) s${STEP_NOTE:+; $STEP_NOTE})"
    echo "# $line"
    echo "$line" >"$LOGS/$STEP_NAME.summary"
}
limit() { # seconds a run may take now: at most $1, and what the step has left less 20 s
    local l=$((DEADLINE - $(date +%s) - 20))
    [ "$l" -gt "$1" ] && l=$1
    [ "$l" -gt 0 ] && echo "$l" || echo 0
}
NO_TIME="no time left in the step's MC_GPU_TEST_BUDGET ($MC_GPU_TEST_BUDGET s)"
timed() { # limit command...: the command under timeout (TERM, then KILL 10 s later)
    local l=$1
    shift
    timeout -k 10 "$l" "$@"
}
cut_why() { # rc limit: a phrase for a run that timeout ended
    case $1 in 124 | 137) echo "cut at its limit of $2 s" ;; *) echo "exit status $1" ;; esac
}

# The checks of each step, in order (the names a step without a GPU reports skipped).
CHECK_BUILD="build (make WERROR=1 NVCC_WERROR=0: megatron-c, the GPU op tests, test_comm_nccl_gpu)"
[ "$DEVICE" = emu ] && CHECK_BUILD="build of the emulated device (make EMU=1 WERROR=1 emu-tests into $MC_BUILD)"
CHECK_OPS="GPU op tests (test_gpu_*)"
FP32_TOL=1e-4
[ "$DEVICE" = emu ] && FP32_TOL=1e-5 # the emulation computes as the CPU does
TRAIN=(fp32 bf16 fp16 fp16-overflow tp pp dp nccl-tp nccl-pp nccl-dp llama llama-bf16 cudnn cudnn-tp cudnn-pp cudnn-dp
       cudnn-llama)
CUDNN_TOL=1e-2
[ "$DEVICE" = emu ] && CUDNN_TOL=1e-3
declare -A CHECK
CHECK[fp32]="fp32: $MC_GPU_TEST_ITERS iterations on $WHERE give the CPU run's lm losses within $FP32_TOL"
CHECK[bf16]="bf16 on $WHERE tracks its fp32 losses within 1%"
CHECK[fp16]="fp16 with the dynamic loss scaler (from 4096) on $WHERE tracks its fp32 losses within 1%, nothing skipped"
CHECK[fp16-overflow]="fp16 overflow (loss scale from 2^24): $WHERE skips the iterations the CPU skips, same loss scales, losses within 1%"
CHECK[tp]="tp=2 with sequence parallelism, two ranks on one device (--distributed-backend mpi)"
CHECK[pp]="pp=2 with vpp=2, two ranks on one device (--distributed-backend mpi)"
CHECK[dp]="dp=2, distributed optimizer, overlapped grad reduce and param gather, two ranks on one device (--distributed-backend mpi)"
CHECK[nccl-tp]="tp=2 with sequence parallelism on two GPUs (--distributed-backend nccl)"
CHECK[nccl-pp]="pp=2 with vpp=2 on two GPUs (--distributed-backend nccl)"
CHECK[nccl-dp]="dp=2, distributed optimizer, on two GPUs (--distributed-backend nccl)"
CHECK[llama]="Llama block (GQA, SwiGLU, RoPE, RMSNorm, q/k layernorm, untied) in fp32 on $WHERE gives the CPU run's lm losses within $FP32_TOL"
CHECK[llama-bf16]="Llama block in bf16 on $WHERE tracks its fp32 losses within 1%"
CHECK[cudnn]="cuDNN's fused attention (the default): bf16, attention dropout 0, on $WHERE gives the CPU's bf16 lm losses within $CUDNN_TOL"
CHECK[cudnn-tp]="cuDNN's fused attention: tp=2 with sequence parallelism gives the single-rank cuDNN run's numbers (bf16, two ranks on one device)"
CHECK[cudnn-pp]="cuDNN's fused attention: pp=2 with vpp=2 gives the single-rank cuDNN run's numbers (bf16, two ranks on one device)"
CHECK[cudnn-dp]="cuDNN's fused attention: dp=2 with the distributed optimizer gives the single-rank cuDNN run's numbers (bf16, two ranks on one device)"
CHECK[cudnn-llama]="cuDNN's fused attention: the Llama block (grouped-query attention) in bf16, attention dropout 0, gives the CPU's bf16 lm losses within $CUDNN_TOL"
CHECK_SAN="compute-sanitizer memcheck of a short run"
[ "$DEVICE" = emu ] && CHECK_SAN="ASan and UBSan (build/emu-san) on a short run on the emulated device"
CHECK_NCCL="NCCL communicator on this GPU, one rank (test_comm_nccl_gpu)"
step_checks() { # step: the names of its checks, one a line
    case $1 in
    build) echo "$CHECK_BUILD" ;;
    ops) echo "$CHECK_OPS" ;;
    train) for c in "${TRAIN[@]}"; do echo "${CHECK[$c]}"; done ;;
    sanitizer) echo "$CHECK_SAN" ;;
    nccl) echo "$CHECK_NCCL" ;;
    esac
}
fail_all() { # step why: every check of the step failed for one reason
    local c
    while IFS= read -r c; do not_ok "$c: $2"; done < <(step_checks "$1")
}

# The program a step after build runs must be there and built for this device (a device machine
# that went back between calls has lost the build: build_first makes it again).
binary_why() {
    if [ ! -x "$MC_BIN" ]; then
        echo "no $MC_BIN (run the build step first)"
    elif [ "$DEVICE" = cuda ] && ! "$MC_BIN" --version | grep 'built with: CUDA' | grep -vq emulated; then
        echo "$MC_BIN is not built with CUDA ($("$MC_BIN" --version | tail -1))"
    elif [ "$DEVICE" = emu ] && ! "$MC_BIN" --version | grep -q 'emulated device'; then
        echo "$MC_BIN is not an emulated build ($("$MC_BIN" --version | tail -1))"
    fi
}

# ---- build ----
# make of an emulated tree: build/emu, or build/emu-san with SANITIZE=1
emu_make() { # tree limit log
    local san=0
    case $1 in *emu-san) san=1 ;; esac
    timed "$2" make -j"$(nproc)" EMU=1 SANITIZE=$san WERROR=1 emu-tests >"$3" 2>&1
}
step_build() {
    if [ "${MC_GPU_TEST_NO_BUILD:-0}" = 1 ]; then
        skip "$CHECK_BUILD" "MC_GPU_TEST_NO_BUILD=1: using $MC_BIN as built"
        return
    fi
    local l rc why
    l=$(limit "$MC_GPU_TEST_BUDGET")
    if [ "$DEVICE" = emu ]; then
        emu_make "$MC_BUILD" "$l" "$LOGS/build.log"
    else
        # only what the steps run: `make tests` would build the unit tests and the emulated tree too
        local targets=(build/rel/megatron-c build/rel/test/mpi/test_comm_nccl_gpu) t
        for t in test/gpu/test_gpu_*.c; do t=${t##*/}; targets+=("build/rel/test/${t%.c}"); done
        timed "$l" make -j"$(nproc)" WERROR=1 NVCC_WERROR=0 "${targets[@]}" >"$LOGS/build.log" 2>&1
    fi
    rc=$?
    # with WERROR=1 the C compiler's warnings are errors: what is left is nvcc's (and its host
    # compiler's and ptxas's), once per line although nvcc repeats them per architecture
    grep 'warning' "$LOGS/build.log" | sort -u >"$LOGS/nvcc-warnings.log"
    local w
    w=$(wc -l <"$LOGS/nvcc-warnings.log")
    [ "$DEVICE" = cuda ] && STEP_NOTE="$w nvcc warnings"
    if [ $rc -ne 0 ]; then
        not_ok "$CHECK_BUILD ($(cut_why $rc "$l")): $(tail -c 600 "$LOGS/build.log")"
    elif why=$(binary_why) && [ -n "$why" ]; then
        not_ok "$CHECK_BUILD: $why"
    else
        ok "$CHECK_BUILD ($w warnings$([ "$w" -gt 0 ] && echo ", in nvcc-warnings.log"))"
    fi
}

# ---- ops ----
step_ops() {
    local found=0 t name rc p s f l
    for t in "$MC_BUILD"/test/test_gpu_*; do
        [ -x "$t" ] || continue
        name=$(basename "$t")
        if [ -n "${MC_GPU_TEST_OPS:-}" ] && [[ " $MC_GPU_TEST_OPS " != *" ${name#test_gpu_} "* ]]; then continue; fi
        found=1
        l=$(limit 300)
        if [ "$l" -eq 0 ]; then not_ok "op tests $name: $NO_TIME"; continue; fi
        CMOCKA_MESSAGE_OUTPUT=TAP timed "$l" "$t" >"$LOGS/$name.out" 2>&1
        rc=$?
        p=$(grep -E '^ok ' "$LOGS/$name.out" | grep -cvE '# ?SKIP')
        s=$(grep -cE '^(not )?ok .*# ?SKIP' "$LOGS/$name.out")
        f=$(grep -E '^not ok ' "$LOGS/$name.out" | grep -cvE '# ?SKIP')
        if [ $rc -eq 0 ] && [ "$f" -eq 0 ] && [ "$s" -eq 0 ] && [ "$p" -gt 0 ]; then
            ok "op tests $name: $p passed"
        else
            local what
            what=$(grep -E '^not ok|SKIP' "$LOGS/$name.out" | head -3 | tr '\n' ' ')
            [ $rc -eq 0 ] || what="$(cut_why $rc "$l"): $what$(tail -c 300 "$LOGS/$name.out" | tr '\n' ' ')"
            not_ok "op tests $name: $p passed, $f failed, $s skipped on $WHERE: $what"
        fi
    done
    [ $found -eq 1 ] || not_ok "$CHECK_OPS: no test_gpu_*${MC_GPU_TEST_OPS:+ of $MC_GPU_TEST_OPS} in $MC_BUILD/test (run the build step first)"
}

# ---- training runs ----
FLAGS=(--mock-data --vocab-size 1024 --make-vocab-size-divisible-by 128 --num-layers 4 --hidden-size 128
       --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 --micro-batch-size 4
       --global-batch-size 16 --lr 3e-3 --lr-decay-style cosine --lr-warmup-iters 3
       --min-lr 1e-4 --weight-decay 0.1 --clip-grad 1.0 --log-interval 1 --eval-iters 2
       --seed 1234 --hidden-dropout 0.1 --attention-dropout 0.1 --log-params-norm)
if [ "$DEVICE" = emu ]; then # ~1 s an iteration emulated on one core
    FLAGS=(--mock-data --vocab-size 256 --num-layers 4 --hidden-size 32 --num-attention-heads 4 --seq-length 32
           --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --lr 3e-3
           --lr-decay-style cosine --lr-warmup-iters 3 --min-lr 1e-4 --weight-decay 0.1 --clip-grad 1.0
           --log-interval 1 --eval-iters 2 --seed 1234 --hidden-dropout 0.1 --attention-dropout 0.1
           --log-params-norm)
fi
ITERS=(--train-iters "$MC_GPU_TEST_ITERS" --eval-interval $(((MC_GPU_TEST_ITERS + 1) / 2)))

# mpirun settings of the integration tests (shared memory only, as root, oversubscribed); the
# ranks keep OpenMPI's allocations until exit, which LeakSanitizer would report (test/integration/mpi.sh)
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -x "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")

RUN_WHY=""
train() { # name np device args...: a run into $LOGS/name; 0 if it exited 0 on the asked device, else RUN_WHY says why
    local name=$1 np=$2 dev=$3 l t
    shift 3
    l=$(limit "$MC_GPU_TEST_TIMEOUT")
    if [ "$l" -eq 0 ]; then
        RUN_WHY="$name: $NO_TIME"
        return 1
    fi
    t=$(date +%s)
    if [ "$np" -eq 1 ]; then
        timed "$l" "$MC_BIN" --device "$dev" "${FLAGS[@]}" "${ITERS[@]}" "$@" >"$LOGS/$name" 2>"$LOGS/$name.err"
    else
        timed "$l" "${MPIRUN[@]}" -np "$np" "$MC_BIN" --device "$dev" "${FLAGS[@]}" "${ITERS[@]}" "$@" >"$LOGS/$name" 2>"$LOGS/$name.err"
    fi
    local rc=$?
    echo "# $name: $(($(date +%s) - t)) s, exit status $rc"
    if [ $rc -ne 0 ]; then
        RUN_WHY="$name: $(cut_why $rc "$l")$([ -s "$LOGS/$name.err" ] && echo ": $(tail -c 400 "$LOGS/$name.err" | tr '\n' ' ')")"
        return 1
    fi
    if ! grep -q "^> device: $dev" "$LOGS/$name"; then
        RUN_WHY="$name did not run on the $dev backend: $(grep '^> device' "$LOGS/$name")"
        return 1
    fi
}

# The numbers of a log, one line per logged iteration ("itN loss gradnorm paramsnorm", - for a
# norm not logged; "itN skipped - -" for an iteration the loss scaler skipped) and per validation
# ("valN loss - -").
numbers() {
    sed -nE 's/.* iteration +([0-9]+)\/.*\| lm loss: ([0-9.E+-]+) \|.*grad norm: ([0-9.]+) \| params norm: ([0-9.]+) \|.*/it\1 \2 \3 \4/p; t
             s/.* iteration +([0-9]+)\/.*\| lm loss: ([0-9.E+-]+) \|.*grad norm: ([0-9.]+) \|.*/it\1 \2 \3 -/p; t
             s/.* iteration +([0-9]+)\/.*number of skipped iterations: +1 \|.*/it\1 skipped - -/p; t
             s/.*validation loss at iteration ([0-9]+) \| lm loss value: ([0-9.E+-]+) .*/val\1 \2 - -/p' "$1"
}
# compare REF RUN TOL_LOSS TOL_GRAD TOL_PARAMS [MIN]: every line of REF in RUN with its losses
# within TOL_LOSS relative, grad norms TOL_GRAD, params norms TOL_PARAMS (- skips), the same
# iterations skipped; at least MIN (MC_GPU_TEST_ITERS) applied iterations. Prints the largest
# relative differences; returns 0 if within.
compare() {
    paste -d' ' <(numbers "$1") <(numbers "$2") | awk -v tl="$3" -v tg="$4" -v tp="$5" -v min="${6:-$MC_GPU_TEST_ITERS}" \
        -v want="$(numbers "$1" | wc -l)" '
        function rel(a, b) { d = a - b; if (d < 0) d = -d; m = (a < 0 ? -a : a); return m > 0 ? d / m : d }
        NF != 8 || $1 != $5 { bad++; unpaired++; next }
        $2 == "skipped" || $6 == "skipped" { n++; if ($2 != $6) { bad++; one++ } next }
        { n++; if ($1 !~ /^val/) iters++
          l = rel($2, $6); if (l > ml) ml = l; if (l > tl) bad++
          if ($3 != "-") { g = rel($3, $7); if (g > mg) mg = g; if (tg != "-" && g > tg) bad++ }
          if ($4 != "-") { p = rel($4, $8); if (p > mp) mp = p; if (tp != "-" && p > tp) bad++ } }
        END { printf "max relative differences: loss %.2e, grad norm %.2e, params norm %.2e over %d lines", ml, mg, mp, n
              if (one) printf ", %d iterations skipped in one run only", one
              if (unpaired) printf ", %d lines unpaired (the runs logged other iterations)", unpaired
              exit !(n == want && iters >= min && bad == 0) }'
}
# Per logged iteration: the loss scale after it and whether it was skipped.
scales() { sed -nE 's/.* iteration +([0-9]+)\/.*\| loss scale: ([0-9.]+) \|.*number of skipped iterations: +([0-9]+) \|.*/\1 \2 \3/p' "$1"; }

selected() { [[ " $MC_GPU_TEST_ONLY " == *" $1 "* ]]; }
result() { # check-key ok? detail: one TAP line
    if [ "$2" -eq 0 ]; then ok "${CHECK[$1]} ($3)"; else not_ok "${CHECK[$1]} ($3)"; fi
}

LAYOUT_KEYS=(tp pp dp)
declare -A LAYOUT=([tp]="--tensor-model-parallel-size 2 --sequence-parallel"
                   [pp]="--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1"
                   [dp]="--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 20000")
layout() { # key backend
    local key=$1 backend=$2 name=${1}
    [ "$backend" = nccl ] && name=nccl-$key
    # shellcheck disable=SC2086
    if train "layout-$name" 2 cuda --distributed-backend "$backend" ${LAYOUT[$key]}; then
        local d
        d=$(compare "$LOGS/fp32" "$LOGS/layout-$name" "$LAYOUT_TOL_LOSS" "$LAYOUT_TOL_GRAD" "$LAYOUT_TOL_LOSS")
        result "$name" $? "$d"
    else
        not_ok "${CHECK[$name]}: $RUN_WHY"
    fi
}

step_train() {
    export NVIDIA_TF32_OVERRIDE=0
    local c d rc have_fp32=0
    for c in bf16 fp16 tp pp dp; do selected $c && have_fp32=1; done
    selected fp32 && have_fp32=1
    # the device's fp32 run is the reference of the others
    if [ $have_fp32 -eq 1 ] && train fp32 1 cuda; then have_fp32=2; fi
    local fp32_why=$RUN_WHY

    if ! selected fp32; then
        skip "${CHECK[fp32]}" "not in MC_GPU_TEST_ONLY"
    elif [ $have_fp32 -ne 2 ]; then
        not_ok "${CHECK[fp32]}: $fp32_why"
    elif train cpu-fp32 1 cpu; then
        d=$(compare "$LOGS/cpu-fp32" "$LOGS/fp32" "$FP32_TOL" - -)
        result fp32 $? "$d"
    else
        not_ok "${CHECK[fp32]}: $RUN_WHY"
    fi

    # 16-bit runs against the device's fp32 run
    local key args
    for key in bf16 fp16; do
        if ! selected $key; then skip "${CHECK[$key]}" "not in MC_GPU_TEST_ONLY"; continue; fi
        if [ $have_fp32 -ne 2 ]; then not_ok "${CHECK[$key]}: no fp32 run ($fp32_why)"; continue; fi
        # the project's attention kernels, as in the fp32 run: their dropout masks are the CPU's in
        # every precision, so the two runs drop the same entries and differ by rounding alone.
        # cuDNN's attention (the 16-bit default) draws its masks from its own generator: against
        # the fp32 run it would be another dropout sample (the H200's first run: 1.9% apart for the
        # Llama block); 13-17 check cuDNN's attention, with attention dropout 0.
        args=(--bf16 --attention-backend local)
        [ $key = fp16 ] && args=(--fp16 --initial-loss-scale 4096 --attention-backend local)
        if train $key 1 cuda "${args[@]}"; then
            d=$(compare "$LOGS/fp32" "$LOGS/$key" 1e-2 - -)
            result $key $? "$d"
        else
            not_ok "${CHECK[$key]}: $RUN_WHY"
        fi
    done

    # fp16 overflow: the device and the CPU skip the same iterations
    key=fp16-overflow
    # the project's attention kernels: their dropout masks are the CPU's, so the same iterations
    # overflow (cuDNN's, the fp16 default, draw other masks: 13-17 check it with dropout 0)
    args=(--fp16 --initial-loss-scale 16777216 --hysteresis 1 --train-iters 12 --eval-interval 12
          --attention-backend local)
    if ! selected $key; then
        skip "${CHECK[$key]}" "not in MC_GPU_TEST_ONLY"
    elif train fp16-overflow 1 cuda "${args[@]}" && train cpu-fp16-overflow 1 cpu "${args[@]}"; then
        d=$(compare "$LOGS/cpu-fp16-overflow" "$LOGS/fp16-overflow" 1e-2 - - 1)
        rc=$?
        local sk ap
        sk=$(scales "$LOGS/fp16-overflow" | awk '$3 == 1' | wc -l)
        ap=$(scales "$LOGS/fp16-overflow" | awk '$3 == 0' | wc -l)
        if ! cmp -s <(scales "$LOGS/cpu-fp16-overflow") <(scales "$LOGS/fp16-overflow"); then
            rc=1 d="loss scales or skips differ from the CPU's from iteration $(diff <(scales "$LOGS/cpu-fp16-overflow") <(scales "$LOGS/fp16-overflow") | sed -nE 's/^[<>] ([0-9]+) .*/\1/p' | head -1); $d"
        elif [ "$sk" -eq 0 ] || [ "$ap" -eq 0 ]; then
            rc=1 d="want skipped and applied iterations, got $sk and $ap; $d"
        else
            d="$sk of $((sk + ap)) iterations skipped as on the CPU, same loss scales; $d"
        fi
        result $key $rc "$d"
    else
        not_ok "${CHECK[$key]}: $RUN_WHY"
    fi

    for key in "${LAYOUT_KEYS[@]}"; do
        if ! selected "$key"; then
            skip "${CHECK[$key]}" "not in MC_GPU_TEST_ONLY"
        elif ! command -v mpirun >/dev/null 2>&1; then
            if [ "$DEVICE" = emu ]; then skip "${CHECK[$key]}" "mpirun is not installed"; else not_ok "${CHECK[$key]}: no mpirun (source scripts/device-env.sh)"; fi
        elif [ $have_fp32 -ne 2 ]; then
            not_ok "${CHECK[$key]}: no single-rank run ($fp32_why)"
        else
            layout "$key" mpi
        fi
    done
    for key in "${LAYOUT_KEYS[@]}"; do
        if [ "$DEVICE" = emu ]; then
            skip "${CHECK[nccl-$key]}" "NCCL is not emulated"
        elif [ "$GPUS" -lt 2 ]; then
            skip "${CHECK[nccl-$key]}" "$GPUS GPU visible, NCCL needs one per rank"
        elif ! selected "$key"; then
            skip "${CHECK[nccl-$key]}" "not in MC_GPU_TEST_ONLY"
        elif [ $have_fp32 -ne 2 ]; then
            not_ok "${CHECK[nccl-$key]}: no single-rank run ($fp32_why)"
        else
            layout "$key" nccl
        fi
    done
    llama_checks
    cudnn_checks
}

# cuDNN's fused attention (13-17 above): every run's log must name it.
CUDNN_ARGS=(--bf16 --attention-dropout 0 --attention-backend auto --train-iters "$MC_GPU_TEST_CUDNN_ITERS"
            --eval-interval $(((MC_GPU_TEST_CUDNN_ITERS + 1) / 2)))
on_cudnn() { # log: 0 if its start-up names cuDNN's attention, else RUN_WHY says what it names
    grep -q '^> attention: cuDNN ' "$1" && return 0
    RUN_WHY="$(basename "$1") did not run cuDNN's attention: $(grep '^> attention' "$1")"
    return 1
}
cudnn_model() { # key name args...: the device's bf16 run against the CPU's
    local key=$1 name=$2 d
    shift 2
    if ! selected "$key"; then skip "${CHECK[$key]}" "not in MC_GPU_TEST_ONLY"; return 1; fi
    if train "$name" 1 cuda "${CUDNN_ARGS[@]}" "$@" && on_cudnn "$LOGS/$name" &&
        train "cpu-$name" 1 cpu "${CUDNN_ARGS[@]}" "$@"; then
        d=$(compare "$LOGS/cpu-$name" "$LOGS/$name" "$CUDNN_TOL" - - "$MC_GPU_TEST_CUDNN_ITERS")
        result "$key" $? "$d"
        return 0
    fi
    not_ok "${CHECK[$key]}: $RUN_WHY"
    return 1
}
# The lm-loss tolerance of a cuDNN layout against the single-rank cuDNN run (both bf16). pp and
# dp round as one rank does in the forward: 1e-4. tp 2 rounds more: each rank's partial output of
# the row-parallel GEMMs (attention projection, fc2) is stored in bf16 before the reduce-scatter
# adds the two (model/tp.c mc_tp_row_output; the sum rounded to bf16 again), and the column-
# parallel input gradients likewise, where one rank rounds each full sum once: up to 2^-9 of each
# partial more per element, every layer, every iteration. That moved the H200's loss by 1.2e-4
# (grad norm 6.5e-3) over 8 iterations. 1e-3, half of one bf16 rounding of the loss itself
# (2^-9), allows it; a layout error (a partial sum missing, a shard misplaced) moves the loss by
# percents.
cudnn_layout_tol() { if [ "$1" = cudnn-tp ]; then echo 1e-3; else echo 1e-4; fi; }
cudnn_checks() {
    local key have=0 d
    cudnn_model cudnn cudnn && have=1
    for key in "${LAYOUT_KEYS[@]}"; do
        key=cudnn-$key
        if ! selected "$key"; then
            skip "${CHECK[$key]}" "not in MC_GPU_TEST_ONLY"
        elif ! command -v mpirun >/dev/null 2>&1; then
            if [ "$DEVICE" = emu ]; then skip "${CHECK[$key]}" "mpirun is not installed"; else not_ok "${CHECK[$key]}: no mpirun (source scripts/device-env.sh)"; fi
        elif [ $have -ne 1 ]; then
            not_ok "${CHECK[$key]}: no single-rank cuDNN run"
        # shellcheck disable=SC2086
        elif train "layout-$key" 2 cuda --distributed-backend mpi ${LAYOUT[${key#cudnn-}]} "${CUDNN_ARGS[@]}" &&
            on_cudnn "$LOGS/layout-$key"; then
            d=$(compare "$LOGS/cudnn" "$LOGS/layout-$key" "$(cudnn_layout_tol "$key")" 1e-2 1e-3 "$MC_GPU_TEST_CUDNN_ITERS")
            result "$key" $? "$d"
        else
            not_ok "${CHECK[$key]}: $RUN_WHY"
        fi
    done
    cudnn_model cudnn-llama cudnn-llama "${LLAMA[@]}"
}

# The Llama block's ops (rope, qk_norm, rmsnorm, swiglu, grouped-query attention) in a training
# run: fp32 against the CPU, bf16 against the device's fp32.
LLAMA=(--position-embedding-type rope --normalization RMSNorm --swiglu --group-query-attention
       --num-query-groups 2 --qk-layernorm --untie-embeddings-and-output-weights --disable-bias-linear)
llama_checks() {
    local d have=0
    if ! selected llama && ! selected llama-bf16; then
        skip "${CHECK[llama]}" "not in MC_GPU_TEST_ONLY"
        skip "${CHECK[llama-bf16]}" "not in MC_GPU_TEST_ONLY"
        return
    fi
    train llama 1 cuda "${LLAMA[@]}" && have=1
    local why=$RUN_WHY
    if ! selected llama; then
        skip "${CHECK[llama]}" "not in MC_GPU_TEST_ONLY"
    elif [ $have -ne 1 ]; then
        not_ok "${CHECK[llama]}: $why"
    elif train cpu-llama 1 cpu "${LLAMA[@]}"; then
        d=$(compare "$LOGS/cpu-llama" "$LOGS/llama" "$FP32_TOL" - -)
        result llama $? "$d"
    else
        not_ok "${CHECK[llama]}: $RUN_WHY"
    fi
    if ! selected llama-bf16; then
        skip "${CHECK[llama-bf16]}" "not in MC_GPU_TEST_ONLY"
    elif [ $have -ne 1 ]; then
        not_ok "${CHECK[llama-bf16]}: no fp32 run ($why)"
    elif train llama-bf16 1 cuda "${LLAMA[@]}" --bf16 --attention-backend local; then # as 2.
        d=$(compare "$LOGS/llama" "$LOGS/llama-bf16" 1e-2 - -)
        result llama-bf16 $? "$d"
    else
        not_ok "${CHECK[llama-bf16]}: $RUN_WHY"
    fi
}

# ---- sanitizer ----
SAN_ARGS=(--train-iters "$MC_GPU_TEST_SAN_ITERS" --lr-warmup-iters 1 --eval-interval 2 --eval-iters 1 --bf16)
step_sanitizer() {
    local l rc t what="$MC_GPU_TEST_SAN_ITERS bf16 iterations and an evaluation"
    if [ "$DEVICE" = emu ]; then
        # ASan and UBSan stand in for compute-sanitizer: the sanitized tree, made here
        local bin=$MC_EMU_SAN_BUILD/megatron-c
        if [ "${MC_GPU_TEST_NO_BUILD:-0}" != 1 ]; then
            l=$(limit "$MC_GPU_TEST_BUDGET")
            emu_make "$MC_EMU_SAN_BUILD" "$l" "$LOGS/build-san.log" ||
                { not_ok "$CHECK_SAN: make EMU=1 SANITIZE=1 emu-tests failed: $(tail -c 400 "$LOGS/build-san.log")"; return; }
        fi
        [ -x "$bin" ] || { not_ok "$CHECK_SAN: no $bin"; return; }
        l=$(limit "$MC_GPU_TEST_BUDGET")
        [ "$l" -gt 0 ] || { not_ok "$CHECK_SAN: $NO_TIME"; return; }
        t=$(date +%s)
        timed "$l" "$bin" --device cuda "${FLAGS[@]}" "${SAN_ARGS[@]}" >"$LOGS/sanitizer" 2>"$LOGS/sanitizer.err"
        rc=$?
        echo "# sanitizer run: $(($(date +%s) - t)) s"
        if [ $rc -eq 0 ] && grep -q '^> device: cuda' "$LOGS/sanitizer" && grep -q "iteration *$MC_GPU_TEST_SAN_ITERS/" "$LOGS/sanitizer" &&
            ! grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:|^cuda-emu:' "$LOGS/sanitizer.err"; then
            ok "$CHECK_SAN ($what: no report)"
        else
            not_ok "$CHECK_SAN ($(cut_why $rc "$l")): $(grep -m3 -E 'ERROR|runtime error|cuda-emu|error' "$LOGS/sanitizer.err" | tr '\n' ' ')"
        fi
        return
    fi
    local san="" c
    for c in "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" /usr/local/cuda/bin/compute-sanitizer \
        "$(command -v compute-sanitizer 2>/dev/null)"; do
        if [ -n "$c" ] && [ -x "$c" ]; then san=$c; break; fi
    done
    if [ -z "$san" ]; then
        not_ok "$CHECK_SAN: compute-sanitizer not found under \$CUDA_HOME/bin, /usr/local/cuda/bin or PATH"
        return
    fi
    l=$(limit "$MC_GPU_TEST_BUDGET")
    [ "$l" -gt 0 ] || { not_ok "$CHECK_SAN: $NO_TIME"; return; }
    t=$(date +%s)
    timed "$l" "$san" --tool memcheck --error-exitcode 9 "$MC_BIN" --device cuda "${FLAGS[@]}" "${SAN_ARGS[@]}" \
        >"$LOGS/sanitizer" 2>&1
    rc=$?
    echo "# compute-sanitizer run: $(($(date +%s) - t)) s"
    if [ $rc -eq 0 ] && grep -q 'ERROR SUMMARY: 0 errors' "$LOGS/sanitizer"; then
        ok "$CHECK_SAN ($what: 0 errors)"
    else
        not_ok "$CHECK_SAN ($(cut_why $rc "$l"); fewer with MC_GPU_TEST_SAN_ITERS): $(grep -m3 -E 'Invalid|ERROR SUMMARY|error' "$LOGS/sanitizer" | tr '\n' ' ')"
    fi
}

# ---- nccl: the NCCL communicator on real NCCL with one rank (every group of one: the streams,
# events, watchdog and staging against the real library; two ranks need two GPUs, train's nccl
# layouts) ----
step_nccl() {
    local bin=$MC_BUILD/test/mpi/test_comm_nccl_gpu l rc p f
    if [ "$DEVICE" = emu ]; then
        skip "$CHECK_NCCL" "NCCL is not emulated"
        return
    fi
    [ -x "$bin" ] || { not_ok "$CHECK_NCCL: no $bin (run the build step first)"; return; }
    l=$(limit 300)
    [ "$l" -gt 0 ] || { not_ok "$CHECK_NCCL: $NO_TIME"; return; }
    timed "$l" "$bin" >"$LOGS/nccl1" 2>&1
    rc=$?
    p=$(grep -c '^ok ' "$LOGS/nccl1")
    f=$(grep -c '^not ok ' "$LOGS/nccl1")
    if [ $rc -eq 0 ] && [ "$f" -eq 0 ] && [ "$p" -gt 0 ]; then
        ok "$CHECK_NCCL ($p checks)"
    else
        not_ok "$CHECK_NCCL ($(cut_why $rc "$l"), $p passed, $f failed): $(grep -m3 -E '^not ok|error' "$LOGS/nccl1" | tr '\n' ' ')"
    fi
}

# A GPU step on a machine without the build (it went back between calls, or this is the first
# call) builds first, within the step's budget, unless MC_GPU_TEST_NO_BUILD=1.
build_first() { # step
    [ "$DEVICE" = cuda ] && [ "$1" != build ] && [ "${MC_GPU_TEST_NO_BUILD:-0}" != 1 ] || return 0
    local why
    why=$(binary_why)
    [ -z "$why" ] && { [ "$1" != nccl ] || [ -x "$MC_BUILD/test/mpi/test_comm_nccl_gpu" ]; } && return 0
    echo "# ${why:-no test_comm_nccl_gpu}: building first"
    step_build
}

run_step() { # step
    local s=$1 why c
    step_begin "$s"
    [ "$GPUS" -gt 0 ] && build_first "$s"
    if [ "$GPUS" -eq 0 ]; then
        [ "$s" = build ] && echo "# no GPU visible (nvidia-smi -L lists none, or CUDA_VISIBLE_DEVICES hides them): nothing to test"
        while IFS= read -r c; do skip "$c" "no GPU"; done < <(step_checks "$s")
    elif [ "$s" != build ] && [ "$s" != nccl ] && { [ "$s" != sanitizer ] || [ "$DEVICE" = cuda ]; } &&
        why=$(binary_why) && [ -n "$why" ]; then
        fail_all "$s" "$why"
    else
        "step_$s"
    fi
    step_end
}

if [ "$STEP" = all ]; then
    T_ALL=$(date +%s)
    for s in "${STEPS[@]}"; do
        run_step "$s"
        # nothing to test without a build
        [ "$s" = build ] && [ "$failed" -gt 0 ] && break
    done
    echo "gpu-test all: $passed passed, $failed failed, $skipped skipped ($(($(date +%s) - T_ALL)) s)" >"$LOGS/all.summary"
else
    run_step "$STEP"
fi
finish
