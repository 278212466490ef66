#!/usr/bin/env bash
# The GPU scripts without a GPU. scripts/gpu-test.sh, in steps: without a GPU every check of every
# step is reported skipped, each step's summary is written and it exits 0; rehearsed on the
# emulated device (MC_GPU_TEST_DEVICE=emu, MC_EMU_BUILD) the build, ops, nccl and (on an up-to-date
# build/emu-san) sanitizer steps pass and write their summaries, a skipped op test fails, and a
# run that outlasts the step's budget is cut and reported inside the step (test_cuda_emu.sh
# rehearses the train step in full). bench/bench.sh says there is no GPU and exits 0, and its
# plumbing (micro batch search, log parsing, the markdown table, the summaries, the PyTorch peer)
# works on tiny models on the CPU (BENCH_SMOKE=1) and on the emulated device (BENCH_DEVICE=emu);
# bench/gpt_torch.py counts FLOPs with Megatron's formula (the value test_log checks for C).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3

summary_is() { # file step counts: one line, "gpu-test STEP: COUNTS (N s[; note])"
    [ -f "$1" ] && [ "$(wc -l <"$1")" -eq 1 ] && grep -qE "^gpu-test $2: $3 \([0-9]+ s(; .*)?\)$" "$1"
}
closes() { # output rc counts [want-rc]: the closing line, the exit status
    tail -1 "$1" | grep -qx "gpu-test: $3" && [ "$2" -eq "${4:-0}" ]
}

# ---- without a GPU ----
CUDA_VISIBLE_DEVICES= MC_GPU_TEST_LOGS="$MC_TMP/none-logs" bash "$ROOT/scripts/gpu-test.sh" >"$MC_TMP/none" 2>&1
rc=$?
no_gpu_all() {
    closes "$MC_TMP/none" $rc "0 passed, 0 failed, 21 skipped" &&
        [ "$(grep -c '^ok [0-9]* - .* # SKIP no GPU$' "$MC_TMP/none")" -eq 21 ]
}
check "gpu-test.sh without a GPU: exit 0, all 21 checks of the 5 steps skipped (rc=$rc)" no_gpu_all
no_gpu_summaries() {
    local d=$MC_TMP/none-logs s
    for s in build ops sanitizer nccl; do summary_is "$d/$s.summary" $s "0 passed, 0 failed, 1 skipped" || return 1; done
    summary_is "$d/train.summary" train "0 passed, 0 failed, 17 skipped" &&
        summary_is "$d/all.summary" all "0 passed, 0 failed, 21 skipped"
}
check "gpu-test.sh without a GPU: a one-line summary per step and for all" no_gpu_summaries
CUDA_VISIBLE_DEVICES= MC_GPU_TEST_LOGS="$MC_TMP/none-train" bash "$ROOT/scripts/gpu-test.sh" train >"$MC_TMP/none-train.out" 2>&1
rc=$?
check "gpu-test.sh train without a GPU: that step alone, its 17 checks skipped, exit 0 (rc=$rc)" \
    bash -c "$(declare -f closes); closes '$MC_TMP/none-train.out' $rc '0 passed, 0 failed, 17 skipped' &&
             [ \"\$(ls '$MC_TMP/none-train')\" = train.summary ]"
bash "$ROOT/scripts/gpu-test.sh" bench >"$MC_TMP/bad-step" 2>&1
rc=$?
check "gpu-test.sh with an unknown step: its usage, status 2 (rc=$rc)" \
    bash -c "[ $rc -eq 2 ] && grep -qF 'usage: scripts/gpu-test.sh [build|ops|train|sanitizer|nccl|all]' '$MC_TMP/bad-step'"

# ---- the emulated rehearsal, step by step (test_cuda_emu.sh runs the train step in full) ----
emu_step() { # step name env...: gpu-test.sh STEP on the emulated device into $MC_TMP/NAME{,.out}
    local step=$1 name=$2
    shift 2
    env MC_GPU_TEST_DEVICE=emu MC_EMU_BUILD="$MC_EMU_BUILD" MC_GPU_TEST_LOGS="$MC_TMP/$name" "$@" \
        bash "$ROOT/scripts/gpu-test.sh" "$step" >"$MC_TMP/$name.out" 2>&1
}
emu_passes() { # name step rc counts: closing line, exit 0, summary
    closes "$MC_TMP/$1.out" "$3" "$4" && summary_is "$MC_TMP/$1/$2.summary" "$2" "$4"
}
if [ -z "${MC_EMU_BUILD:-}" ] || [ ! -x "$MC_EMU_BUILD/megatron-c" ]; then
    skip "gpu-test.sh rehearsed on the emulated device" "no emulated build (MC_EMU_BUILD='${MC_EMU_BUILD:-}' has no megatron-c)"
else
    # make of the tree this suite runs, which make test has just built: nothing to do
    emu_step build emu-build
    rc=$?
    check "gpu-test.sh build, emulated: make EMU=1 WERROR=1 emu-tests, summary (rc=$rc)" \
        emu_passes emu-build build $rc "1 passed, 0 failed, 0 skipped"
    emu_step ops emu-ops MC_GPU_TEST_OPS="gelu dropout"
    rc=$?
    check "gpu-test.sh ops, emulated: the op tests asked for (MC_GPU_TEST_OPS) pass, summary (rc=$rc)" \
        emu_passes emu-ops ops $rc "2 passed, 0 failed, 0 skipped"
    # an op test that skips where the device exists fails the step
    fake=$MC_TMP/fake-emu
    mkdir -p "$fake/test"
    ln -s "$MC_EMU_BUILD/megatron-c" "$fake/megatron-c"
    printf '#!/bin/sh\necho "ok 1 - an op # SKIP no device"\n' >"$fake/test/test_gpu_fake"
    chmod +x "$fake/test/test_gpu_fake"
    MC_EMU_BUILD=$fake emu_step ops emu-ops-skip
    rc=$?
    skip_fails() {
        closes "$MC_TMP/emu-ops-skip.out" $rc "0 passed, 1 failed, 0 skipped" 1 &&
            grep -q '^not ok 1 - op tests test_gpu_fake: 0 passed, 0 failed, 1 skipped' "$MC_TMP/emu-ops-skip.out"
    }
    check "gpu-test.sh ops, emulated: a skipped op test is a failure (rc=$rc)" skip_fails
    # the step's budget: the fp32 run (16 s and more, emulated) is cut at 22 - 20 = 2 s (on a
    # loaded machine the setup may already have spent them: then no time is left for it)
    emu_step train emu-cut MC_GPU_TEST_ONLY=fp32 MC_GPU_TEST_BUDGET=22
    rc=$?
    cut_reported() {
        closes "$MC_TMP/emu-cut.out" $rc "0 passed, 1 failed, 16 skipped" 1 &&
            grep -qE "^not ok 1 - fp32: .*(cut at its limit of [12] s|no time left in the step's MC_GPU_TEST_BUDGET)" "$MC_TMP/emu-cut.out" &&
            summary_is "$MC_TMP/emu-cut/train.summary" train "0 passed, 1 failed, 16 skipped"
    }
    check "gpu-test.sh train, emulated: a run longer than the step's budget is cut and reported, summary written (rc=$rc)" cut_reported
    # the sanitizer step runs the sanitized emulated tree (build/emu-san), which the sanitizer
    # build makes (.ci/run's first pass): run on it when it is up to date, never built here
    if [ -x "$ROOT/build/emu-san/megatron-c" ] && (cd "$ROOT" && make -q EMU=1 SANITIZE=1 emu-tests >/dev/null 2>&1); then
        emu_step sanitizer emu-san MC_EMU_SAN_BUILD="$ROOT/build/emu-san" MC_GPU_TEST_NO_BUILD=1
        rc=$?
        check "gpu-test.sh sanitizer, emulated: a short bf16 run under ASan and UBSan reports nothing, summary (rc=$rc)" \
            emu_passes emu-san sanitizer $rc "1 passed, 0 failed, 0 skipped"
    else
        skip "gpu-test.sh sanitizer, emulated" "no up-to-date build/emu-san (make emu SANITIZE=1 makes it; .ci/run's sanitizer pass does)"
    fi
    emu_step nccl emu-nccl
    rc=$?
    check "gpu-test.sh nccl, emulated: reported skipped (NCCL is not emulated), summary (rc=$rc)" \
        emu_passes emu-nccl nccl $rc "0 passed, 0 failed, 1 skipped"
    # what went wrong, when something did (two not-ok lines are expected: the fake skip, the cut)
    [ "$(cat "$MC_TMP"/emu-*.out | grep -c '^not ok')" -eq 2 ] || grep -h '^not ok' "$MC_TMP"/emu-*.out | sed 's/^/# /' | head -20
fi

CUDA_VISIBLE_DEVICES= MC_BIN="$MC_BIN" bash "$ROOT/bench/bench.sh" >"$MC_TMP/bench-none" 2>&1
rc=$?
check "bench.sh without a GPU: says so, exit 0 (rc=$rc)" \
    bash -c "[ $rc -eq 0 ] && grep -q '^bench.sh: no GPU visible' '$MC_TMP/bench-none' && [ \$(wc -l <'$MC_TMP/bench-none') -eq 1 ]"

# OUT (the device tool's output folder) must survive; BENCH_LOGS names the logs' folder
OUT="$MC_TMP/out-kept" BENCH_LOGS="$MC_TMP/bench-logs" BENCH_SMOKE=1 PYTHON=$PY MC_BIN="$MC_BIN" \
    bash "$ROOT/bench/bench.sh" >"$MC_TMP/bench" 2>&1
rc=$?
logs=$(sed -n 's/^logs: //p' "$MC_TMP/bench")
check "bench.sh writes its logs and table to BENCH_LOGS (logs: $logs)" \
    bash -c "[ '$logs' = '$MC_TMP/bench-logs' ] && [ -s '$MC_TMP/bench-logs/table.md' ] && [ ! -e '$MC_TMP/out-kept' ]"
num='[0-9]+ \| [0-9.]+ \| [0-9.]+%'
check "bench.sh plumbing (BENCH_SMOKE, CPU): a markdown table with megatron-c's fastest micro batch per model (rc=$rc)" \
    bash -c "[ $rc -eq 0 ] && grep -q '^| model | implementation | micro batch | tokens/s | TFLOP/s | MFU | peak memory | plan.s tokens/s |$' '$MC_TMP/bench' &&
             [ \$(grep -cE '^\| (124M|350M) \([0-9]+ x [0-9]+, seq [0-9]+\) \| megatron-c \| [0-9]+ \| $num \|' '$MC_TMP/bench') -eq 2 ]"
if $PY -c 'import torch' 2>/dev/null; then
    check "bench.sh runs the PyTorch peer in the same run (eager, on the CPU here)" \
        test "$(grep -cE "^\| (124M|350M) .*\| PyTorch eager \| [0-9]+ \| $num \|" "$MC_TMP/bench")" -eq 2
else
    check "bench.sh says the PyTorch peer could not be run" grep -q 'the peer could not be run' "$MC_TMP/bench"
fi
check "bench.sh has an llm.c row per model, saying why it did not run on the CPU" \
    test "$(grep -cE '^\| (124M|350M) \| llm.c \| - \| not run: llm.c needs a GPU' "$MC_TMP/bench")" -eq 2
[ $rc -eq 0 ] || sed 's/^/# /' "$MC_TMP/bench"
case "$logs" in /tmp/mc-bench.*) rm -rf "$logs" ;; esac

# the emulated rehearsal: megatron-c --device cuda on the emulated device, one summary per model
if [ -z "${MC_EMU_BUILD:-}" ] || [ ! -x "$MC_EMU_BUILD/megatron-c" ]; then
    skip "bench.sh rehearsed on the emulated device" "no emulated build (MC_EMU_BUILD='${MC_EMU_BUILD:-}' has no megatron-c)"
else
    BENCH_DEVICE=emu MC_EMU_BUILD="$MC_EMU_BUILD" BENCH_LOGS="$MC_TMP/bench-emu" PYTHON=$PY \
        bash "$ROOT/bench/bench.sh" >"$MC_TMP/bench-emu.out" 2>&1
    rc=$?
    bench_emu() {
        local d=$MC_TMP/bench-emu m
        [ $rc -eq 0 ] && [ "$(grep -cE "^\| (124M|350M) \([0-9]+ x [0-9]+, seq [0-9]+\) \| megatron-c \| [0-9]+ \| $num \| .* \| [0-9]+ \|$" "$MC_TMP/bench-emu.out")" -eq 2 ] &&
            [ "$(grep -cE "^\| (124M|350M) \([0-9]+ x [0-9]+, seq [0-9]+\) \| megatron-c --attention-backend local \| [0-9]+ \| $num \| .* \| [0-9]+ \|$" "$MC_TMP/bench-emu.out")" -eq 2 ] &&
            [ "$(grep -l '^> device: cuda (.*(emulated)' "$d"/mc-*-mbs[0-9] | wc -l)" -ge 2 ] || return 1
        for m in 124M 350M; do
            [ "$(wc -l <"$d/$m.summary")" -eq 1 ] &&
                grep -qE "^bench $m: megatron-c [0-9]+ tokens/s \(micro batch [0-9]+; megatron-c plan predicted [0-9]+ for h[12]00\); megatron-c --attention-backend local [0-9]+ tokens/s \(micro batch [0-9]+; megatron-c plan predicted [0-9]+; auto [0-9.]+x local\); PyTorch eager[: ].*; llm.c: not run: .* \([0-9]+ s\)$" "$d/$m.summary" || return 1
        done
    }
    check "bench.sh on the emulated device (BENCH_DEVICE=emu): megatron-c --device cuda measured per model with --attention-backend auto and local, the plan's tokens/s beside each, a one-line summary each with the plan's predictions and auto's ratio to local (rc=$rc)" bench_emu
    bench_attention() { # every auto run on cuDNN, every local run on the project's kernels, and the plans alike
        local d=$MC_TMP/bench-emu f
        for f in "$d"/mc-*-mbs[0-9]; do grep -q '^> attention: cuDNN ' "$f" && grep -q '^> attention: cuDNN fused' "$f.plan" || return 1; done
        for f in "$d"/mclocal-*-mbs[0-9]; do
            grep -q "^> attention: the project's kernels: --attention-backend local" "$f" &&
                grep -q "^> attention: the project's kernels" "$f.plan" || return 1
        done
        ls "$d"/mclocal-*-mbs[0-9] >/dev/null 2>&1
    }
    check "bench.sh on the emulated device: auto's runs and plans name cuDNN's fused attention, local's the project's kernels" bench_attention
    if $PY -c 'import torch' 2>/dev/null; then
        check "bench.sh on the emulated device: the PyTorch peer on the CPU, its ratio in the summary" \
            grep -qE '^bench 124M: .*; PyTorch eager [0-9]+ tokens/s \(megatron-c [0-9.]+x\);' "$MC_TMP/bench-emu/124M.summary"
    fi
    [ $rc -eq 0 ] || sed 's/^/# /' "$MC_TMP/bench-emu.out"
fi

# scripts/device-env.sh on a stand-in kit (the real one, from scripts/device-kit.sh, needs apt's
# network): unpacked once under MC_KIT, Debian's mpirun alternative made, the loader, PATH, Open
# MPI's prefix and MC_KIT (which the Makefile reads) set; without a kit, one line and status 1
kit_src=$MC_TMP/kit-src
mkdir -p "$kit_src/usr/lib/x86_64-linux-gnu" "$kit_src/usr/bin"
printf '#!/bin/sh\necho kit-mpirun\n' >"$kit_src/usr/bin/orterun"
chmod +x "$kit_src/usr/bin/orterun"
ln -s orterun "$kit_src/usr/bin/mpirun.openmpi"
tar czf "$MC_TMP/kit.tar.gz" -C "$kit_src" .
env_out=$(MC_KIT_TAR="$MC_TMP/kit.tar.gz" MC_KIT="$MC_TMP/kit" bash -c 'source "$1/scripts/device-env.sh" &&
    echo "$MC_KIT|$OPAL_PREFIX|$(mpirun)|$LD_LIBRARY_PATH|$NCCL_HOME"' _ "$ROOT" 2>&1 | tail -1)
check "device-env.sh unpacks a kit and points MC_KIT, mpirun, Open MPI and the loader there ($env_out)" \
    bash -c "case '$env_out' in '$MC_TMP/kit|$MC_TMP/kit/usr|kit-mpirun|'*'$MC_TMP/kit/usr/lib/x86_64-linux-gnu:'*) true ;; *) false ;; esac"
# cuDNN: a toolkit without it, and a stand-in nvidia-cudnn wheel on python3's path
mkdir -p "$MC_TMP/nocudnn/include" "$MC_TMP/wheel/nvidia/cudnn/include" "$MC_TMP/wheel/nvidia/cudnn/lib"
touch "$MC_TMP/wheel/nvidia/cudnn/include/cudnn_graph.h" "$MC_TMP/wheel/nvidia/cudnn/lib/libcudnn.so.9"
cudnn_out=$(CUDA_HOME="$MC_TMP/nocudnn" NCCL_HOME=/usr/local/cuda PYTHONPATH="$MC_TMP/wheel" MC_KIT_TAR="$MC_TMP/kit.tar.gz" \
    MC_KIT="$MC_TMP/kit" bash -c 'source "$1/scripts/device-env.sh" >/dev/null &&
    echo "$CUDNN_HOME|$(readlink -f "$CUDNN_HOME/lib/libcudnn.so")|$(readlink -f "$CUDNN_HOME/include")|$LD_LIBRARY_PATH"' _ "$ROOT" 2>&1 | tail -1)
check "device-env.sh finds cuDNN in python3's nvidia-cudnn wheel when the toolkit has none ($cudnn_out)" \
    bash -c "case '$cudnn_out' in '$MC_TMP/kit/cudnn|$MC_TMP/wheel/nvidia/cudnn/lib/libcudnn.so.9|$MC_TMP/wheel/nvidia/cudnn/include|$MC_TMP/wheel/nvidia/cudnn/lib:'*) true ;; *) false ;; esac"
rm -rf "$MC_TMP/wheel/nvidia/cudnn"
CUDA_HOME="$MC_TMP/nocudnn" NCCL_HOME=/usr/local/cuda PYTHONPATH="$MC_TMP/wheel" MC_KIT_TAR="$MC_TMP/kit.tar.gz" \
    MC_KIT="$MC_TMP/kit" bash -c 'source "$1/scripts/device-env.sh"; echo "rc=$? CUDNN_HOME=${CUDNN_HOME:-unset}"' _ "$ROOT" \
    >"$MC_TMP/nocudnn.out" 2>&1
check "device-env.sh without cuDNN anywhere: says the attention runs on the project's kernels, CUDNN_HOME unset, status 0" \
    bash -c "grep -q 'no cuDNN .*the project.s kernels' '$MC_TMP/nocudnn.out' && grep -qx 'rc=0 CUDNN_HOME=unset' '$MC_TMP/nocudnn.out'"
env_err=$(MC_KIT_TAR="$MC_TMP/none.tar.gz" MC_KIT="$MC_TMP/kit2" bash -c 'source "$1/scripts/device-env.sh"; echo "rc=$?"' _ "$ROOT" 2>&1)
check "device-env.sh without a kit: one line naming it, status 1 ($env_err)" \
    bash -c "[ \$(printf '%s\n' '$env_err' | wc -l) -eq 2 ] && printf '%s' '$env_err' | grep -q 'no $MC_TMP/none.tar.gz' &&
             printf '%s' '$env_err' | grep -qx 'rc=1'"

check "gpt_torch.py counts Megatron's FLOPs (GPT-2 124M, 512 sequences: 418398534107136)" \
    test "$($PY "$ROOT/bench/gpt_torch.py" --print-flops --layers 12 --hidden 768 --heads 12 --seq 1024 --vocab 50304 --global-batch 512)" = 418398534107136
