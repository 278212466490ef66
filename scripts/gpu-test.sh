#!/usr/bin/env bash
# The CUDA backend's correctness on a machine with a GPU (issue 7, point 4), in one command:
#
#   scripts/gpu-test.sh
#
#  1. builds (make WERROR=1 tests);
#  2. runs every GPU op test (build/rel/test/test_gpu_*: each CUDA op against the CPU op); on a
#     GPU a skipped op test is a failure;
#  3. fp32: 24 iterations (dropout on) on the GPU give the CPU run's lm losses within 1e-4
#     relative. TF32 is switched off (NVIDIA_TF32_OVERRIDE=0): this compares fp32 with fp32;
#  4. bf16 on the GPU tracks the GPU fp32 loss curve within 1% relative per iteration. A bf16
#     value carries 8 significant bits (2^-9 = 0.2% relative rounding per stored value); the
#     loss averages thousands of tokens, so its own error stays far below that, and 1% leaves
#     room for 24 iterations of drift. The CPU backend's bf16 tracks its fp32 by ~1e-4 over the
#     same kind of run (test/integration/test_mixed.sh); the measured gap is printed;
#  5. tp 2, pp 2 with virtual stages, and dp 2 with the distributed optimizer, two ranks on one
#     GPU (--distributed-backend mpi: device buffers staged through host memory) give the
#     single-rank GPU run's lm losses, grad norms and params norms (relative tolerances
#     LAYOUT_TOL_LOSS, default 1e-5, and LAYOUT_TOL_GRAD, default 1e-4, those of the CPU layout
#     tests: the layouts sum in another order);
#  6. the same layouts with --distributed-backend nccl, one GPU per rank, when two GPUs are
#     visible (else reported skipped);
#  7. compute-sanitizer memcheck of a short run (tp 2 under MPI staging would need the sanitizer
#     on every rank; one rank exercises every kernel) reports no error;
#  8. the NCCL communicator's device checks (test_comm_nccl_gpu: test/mpi/test_comm_mpi.c on real
#     CUDA and NCCL) with one rank, so one GPU runs real NCCL too.
#
# Prints TAP lines, then "gpu-test: N passed, M failed, K skipped"; exits 1 if anything failed.
# Without a GPU (none listed by nvidia-smi -L, or CUDA_VISIBLE_DEVICES empty or -1) every check
# is reported skipped and it exits 0.
#
# Environment: MC_BUILD (build/rel), MC_BIN ($MC_BUILD/megatron-c), MC_GPU_TEST_NO_BUILD=1 (use
# the build as it is), MC_GPU_TEST_KEEP=1 (keep the logs; their folder is printed),
# MC_GPU_TEST_LOGS=DIR (the logs go there, kept), MC_GPU_TEST_TIMEOUT (seconds a training run may
# take, default 900; the sanitizer's run twice that; the device tool's calls end at 600 s),
# MC_GPU_TEST_DEVICE=cpu (rehearse every comparison on the CPU backend, without a GPU: this is
# how test/integration/test_gpu_scripts.sh checks the script's own logic).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
: "${MC_BUILD:=$ROOT/build/rel}"
: "${MC_BIN:=$MC_BUILD/megatron-c}"
DEVICE=${MC_GPU_TEST_DEVICE:-cuda}
: "${LAYOUT_TOL_LOSS:=1e-5}" "${LAYOUT_TOL_GRAD:=1e-4}"
: "${MC_GPU_TEST_TIMEOUT:=900}"
if [ -n "${MC_GPU_TEST_LOGS:-}" ]; then
    TMP=$MC_GPU_TEST_LOGS
    mkdir -p "$TMP" || exit 1
    echo "# logs in $TMP"
else
    TMP=$(mktemp -d)
    if [ "${MC_GPU_TEST_KEEP:-0}" = 1 ]; then echo "# logs in $TMP"; else trap 'rm -rf "$TMP"' EXIT; fi
fi

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

CHECKS=("build (make WERROR=1 tests)" "GPU op tests (test_gpu_*)"
        "fp32: 24 GPU iterations give the CPU run's lm losses within 1e-4"
        "bf16 on the GPU tracks the GPU fp32 losses within 1%"
        "tp=2, two ranks on one GPU (--distributed-backend mpi)"
        "pp=2 with vpp=2, two ranks on one GPU (--distributed-backend mpi)"
        "dp=2, distributed optimizer, two ranks on one GPU (--distributed-backend mpi)"
        "tp=2 on two GPUs (--distributed-backend nccl)" "pp=2 with vpp=2 on two GPUs (--distributed-backend nccl)"
        "dp=2, distributed optimizer, on two GPUs (--distributed-backend nccl)"
        "compute-sanitizer memcheck of a short run"
        "NCCL communicator on this GPU, one rank (test_comm_nccl_gpu)")

GPUS=$("$ROOT/scripts/visible-gpus.sh")
if [ "$DEVICE" = cuda ] && [ "$GPUS" -eq 0 ]; then
    echo "# no GPU visible (nvidia-smi -L lists none, or CUDA_VISIBLE_DEVICES hides them): nothing to test"
    for c in "${CHECKS[@]}"; do skip "$c" "no GPU"; done
    finish
fi
if [ "$DEVICE" != cuda ]; then
    echo "# MC_GPU_TEST_DEVICE=$DEVICE: rehearsing the comparisons on the $DEVICE backend (no GPU involved)"
fi

# ---- 1. build ----
if [ "${MC_GPU_TEST_NO_BUILD:-0}" = 1 ]; then
    skip "${CHECKS[0]}" "MC_GPU_TEST_NO_BUILD=1: using $MC_BIN as built"
elif make -j"$(nproc)" WERROR=1 tests >"$TMP/build.log" 2>&1; then
    ok "${CHECKS[0]}"
else
    not_ok "${CHECKS[0]}: $(tail -c 600 "$TMP/build.log")"
    finish
fi
if [ "$DEVICE" = cuda ] && ! "$MC_BIN" --version | grep -q 'built with: CUDA'; then
    not_ok "$MC_BIN is built with CUDA ($("$MC_BIN" --version | tail -1))"
    finish
fi

# ---- 2. op tests ----
if [ "$DEVICE" != cuda ]; then
    skip "${CHECKS[1]}" "no GPU (MC_GPU_TEST_DEVICE=$DEVICE)"
else
    found=0
    for t in "$MC_BUILD"/test/test_gpu_*; do
        [ -x "$t" ] || continue
        found=1
        name=$(basename "$t")
        CMOCKA_MESSAGE_OUTPUT=TAP "$t" >"$TMP/$name.out" 2>&1
        rc=$?
        p=$(grep -E '^ok ' "$TMP/$name.out" | grep -cvE '# ?SKIP')
        s=$(grep -cE '^(not )?ok .*# ?SKIP' "$TMP/$name.out")
        f=$(grep -E '^not ok ' "$TMP/$name.out" | grep -cvE '# ?SKIP')
        if [ $rc -eq 0 ] && [ "$f" -eq 0 ] && [ "$s" -eq 0 ] && [ "$p" -gt 0 ]; then
            ok "op tests $name: $p passed"
        else
            not_ok "op tests $name: $p passed, $f failed, $s skipped on a GPU (rc=$rc): $(grep -E '^not ok|SKIP' "$TMP/$name.out" | head -5 | tr '\n' ' ')"
        fi
    done
    [ $found -eq 1 ] || not_ok "${CHECKS[1]}: no test_gpu_* binary in $MC_BUILD/test"
fi

# ---- training runs ----
FLAGS=(--mock-data --vocab-size 1024 --make-vocab-size-divisible-by 128 --num-layers 4 --hidden-size 128
       --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 --micro-batch-size 4
       --global-batch-size 16 --train-iters 24 --lr 3e-3 --lr-decay-style cosine --lr-warmup-iters 3
       --min-lr 1e-4 --weight-decay 0.1 --clip-grad 1.0 --log-interval 1 --eval-interval 12 --eval-iters 2
       --seed 1234 --hidden-dropout 0.1 --attention-dropout 0.1 --log-params-norm)
if [ "$DEVICE" != cuda ]; then
    FLAGS=(--mock-data --vocab-size 256 --num-layers 4 --hidden-size 32 --num-attention-heads 4 --seq-length 32
           --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --train-iters 24 --lr 3e-3
           --lr-decay-style cosine --lr-warmup-iters 3 --min-lr 1e-4 --weight-decay 0.1 --clip-grad 1.0
           --log-interval 1 --eval-interval 12 --eval-iters 2 --seed 1234 --hidden-dropout 0.1
           --attention-dropout 0.1 --log-params-norm)
fi

# mpirun settings of the integration tests (shared memory only, as root, oversubscribed)
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
MPIRUN=(timeout "$MC_GPU_TEST_TIMEOUT" mpirun --allow-run-as-root --oversubscribe -x "ASAN_OPTIONS=${ASAN_OPTIONS:-}")

train() { # name np device args...: a run into $TMP/name; 0 if it exited 0 on the asked device
    local name=$1 np=$2 dev=$3
    shift 3
    if [ "$np" -eq 1 ]; then
        timeout "$MC_GPU_TEST_TIMEOUT" "$MC_BIN" --device "$dev" "${FLAGS[@]}" "$@" >"$TMP/$name" 2>"$TMP/$name.err"
    else
        "${MPIRUN[@]}" -np "$np" "$MC_BIN" --device "$dev" "${FLAGS[@]}" "$@" >"$TMP/$name" 2>"$TMP/$name.err"
    fi
    local rc=$?
    if [ $rc -ne 0 ]; then
        echo "# $name exited $rc: $(tail -c 400 "$TMP/$name.err" | tr '\n' ' ')"
        return 1
    fi
    if ! grep -q "^> device: $dev" "$TMP/$name"; then
        echo "# $name did not run on the $dev backend: $(grep '^> device' "$TMP/$name")"
        return 1
    fi
}

# The numbers of a log, one line per logged iteration ("itN loss gradnorm paramsnorm", - for a
# norm not logged) and per validation ("valN loss - -").
numbers() {
    sed -nE 's/.* iteration +([0-9]+)\/.*\| lm loss: ([0-9.E+-]+) \|.*grad norm: ([0-9.]+) \| params norm: ([0-9.]+) \|.*/it\1 \2 \3 \4/p; t
             s/.* iteration +([0-9]+)\/.*\| lm loss: ([0-9.E+-]+) \|.*grad norm: ([0-9.]+) \|.*/it\1 \2 \3 -/p; t
             s/.*validation loss at iteration ([0-9]+) \| lm loss value: ([0-9.E+-]+) .*/val\1 \2 - -/p' "$1"
}
# compare REF RUN TOL_LOSS TOL_GRAD TOL_PARAMS: every line of REF in RUN with its losses within
# TOL_LOSS relative, grad norms TOL_GRAD, params norms TOL_PARAMS (- skips); at least 24
# iterations. Prints the largest relative differences; returns 0 if within.
compare() {
    paste -d' ' <(numbers "$1") <(numbers "$2") | awk -v tl="$3" -v tg="$4" -v tp="$5" -v want="$(numbers "$1" | wc -l)" '
        function rel(a, b) { d = a - b; if (d < 0) d = -d; m = (a < 0 ? -a : a); return m > 0 ? d / m : d }
        NF != 8 || $1 != $5 { bad++; next }
        { n++; if ($1 !~ /^val/) iters++
          l = rel($2, $6); if (l > ml) ml = l; if (l > tl) bad++
          if ($3 != "-") { g = rel($3, $7); if (g > mg) mg = g; if (tg != "-" && g > tg) bad++ }
          if ($4 != "-") { p = rel($4, $8); if (p > mp) mp = p; if (tp != "-" && p > tp) bad++ } }
        END { printf "max relative differences: loss %.2e, grad norm %.2e, params norm %.2e over %d lines", ml, mg, mp, n
              exit !(n == want && iters >= 24 && bad == 0) }'
}

# ---- 3. fp32 against the CPU ----
export NVIDIA_TF32_OVERRIDE=0
if train cpu-fp32 1 cpu && train fp32 1 "$DEVICE"; then
    d=$(compare "$TMP/cpu-fp32" "$TMP/fp32" 1e-4 - -)
    if [ $? -eq 0 ]; then ok "${CHECKS[2]} ($d)"; else not_ok "${CHECKS[2]} ($d)"; fi
else
    not_ok "${CHECKS[2]}: a run failed"
fi

# ---- 4. bf16 against fp32 ----
if [ -s "$TMP/fp32" ] && train bf16 1 "$DEVICE" --bf16; then
    d=$(compare "$TMP/fp32" "$TMP/bf16" 1e-2 - -)
    if [ $? -eq 0 ]; then ok "${CHECKS[3]} ($d)"; else not_ok "${CHECKS[3]} ($d)"; fi
else
    not_ok "${CHECKS[3]}: a run failed"
fi

# ---- 5, 6. layouts ----
LAYOUTS=("--tensor-model-parallel-size 2"
         "--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1"
         "--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 20000")
layout() { # check-name backend layout-index
    local name=$1 backend=$2 i=$3
    # shellcheck disable=SC2086
    if train "layout-$backend-$i" 2 "$DEVICE" --distributed-backend "$backend" ${LAYOUTS[$i]}; then
        local d
        d=$(compare "$TMP/fp32" "$TMP/layout-$backend-$i" "$LAYOUT_TOL_LOSS" "$LAYOUT_TOL_GRAD" "$LAYOUT_TOL_LOSS")
        if [ $? -eq 0 ]; then ok "$name ($d)"; else not_ok "$name ($d)"; fi
    else
        not_ok "$name: the run failed"
    fi
}
for i in 0 1 2; do
    if [ -s "$TMP/fp32" ]; then layout "${CHECKS[$((4 + i))]}" mpi $i; else not_ok "${CHECKS[$((4 + i))]}: no single-rank run"; fi
done
for i in 0 1 2; do
    if [ "$DEVICE" != cuda ]; then
        skip "${CHECKS[$((7 + i))]}" "NCCL needs the cuda backend"
    elif [ "$GPUS" -lt 2 ]; then
        skip "${CHECKS[$((7 + i))]}" "$GPUS GPU visible, NCCL needs one per rank"
    elif [ -s "$TMP/fp32" ]; then
        layout "${CHECKS[$((7 + i))]}" nccl $i
    else
        not_ok "${CHECKS[$((7 + i))]}: no single-rank run"
    fi
done

# ---- 7. compute-sanitizer ----
SANITIZER=
for c in "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" /usr/local/cuda/bin/compute-sanitizer \
    "$(command -v compute-sanitizer 2>/dev/null)"; do
    if [ -n "$c" ] && [ -x "$c" ]; then SANITIZER=$c; break; fi
done
if [ "$DEVICE" != cuda ]; then
    skip "${CHECKS[10]}" "no GPU (MC_GPU_TEST_DEVICE=$DEVICE)"
elif [ -z "$SANITIZER" ]; then
    not_ok "${CHECKS[10]}: compute-sanitizer not found under \$CUDA_HOME/bin, /usr/local/cuda/bin or PATH"
else
    timeout $((2 * MC_GPU_TEST_TIMEOUT)) "$SANITIZER" --tool memcheck --error-exitcode 9 "$MC_BIN" --device cuda "${FLAGS[@]}" \
        --train-iters 3 --eval-interval 2 --eval-iters 1 --bf16 >"$TMP/memcheck" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q 'ERROR SUMMARY: 0 errors' "$TMP/memcheck"; then
        ok "${CHECKS[10]} (3 bf16 iterations and an evaluation: 0 errors)"
    else
        not_ok "${CHECKS[10]} (rc=$rc): $(grep -m3 -E 'Invalid|ERROR SUMMARY|error' "$TMP/memcheck" | tr '\n' ' ')"
    fi
fi

# ---- 8. the NCCL communicator on real NCCL with one rank (every group of one: the streams,
# events, watchdog and staging against the real library; two ranks need two GPUs, check 8-10) ----
NCCL1=$MC_BUILD/test/mpi/test_comm_nccl_gpu
if [ "$DEVICE" != cuda ]; then
    skip "${CHECKS[11]}" "no GPU (MC_GPU_TEST_DEVICE=$DEVICE)"
elif [ ! -x "$NCCL1" ]; then
    not_ok "${CHECKS[11]}: $NCCL1 is not built"
else
    timeout "$MC_GPU_TEST_TIMEOUT" "$NCCL1" >"$TMP/nccl1" 2>&1
    rc=$?
    p=$(grep -c '^ok ' "$TMP/nccl1")
    f=$(grep -c '^not ok ' "$TMP/nccl1")
    if [ $rc -eq 0 ] && [ "$f" -eq 0 ] && [ "$p" -gt 0 ]; then
        ok "${CHECKS[11]} ($p checks)"
    else
        not_ok "${CHECKS[11]} (rc=$rc, $p passed, $f failed): $(grep -m3 -E '^not ok|error' "$TMP/nccl1" | tr '\n' ' ')"
    fi
fi
finish
