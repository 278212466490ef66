#!/usr/bin/env bash
# The GPU scripts without a GPU (issue 7, points 4 and 5): scripts/gpu-test.sh reports every
# check skipped and exits 0, and its comparisons, rehearsed on the CPU backend
# (MC_GPU_TEST_DEVICE=cpu), pass (a layout run that differed would fail them); scripts/bench.sh
# says there is no GPU and exits 0, and its plumbing (micro batch search, log parsing, the
# markdown table, the PyTorch peer) works on tiny models on the CPU (BENCH_SMOKE=1);
# bench/gpt_torch.py counts FLOPs with Megatron's formula (the value test_log checks for C).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3

CUDA_VISIBLE_DEVICES= bash "$ROOT/scripts/gpu-test.sh" >"$MC_TMP/none" 2>&1
rc=$?
check "gpu-test.sh without a GPU: exit 0, all 12 checks skipped (rc=$rc)" bash -c "[ $rc -eq 0 ] &&
    [ \$(grep -c '^ok [0-9]* - .* # SKIP no GPU' '$MC_TMP/none') -eq 12 ] &&
    tail -1 '$MC_TMP/none' | grep -qx 'gpu-test: 0 passed, 0 failed, 12 skipped'"

if have_mpirun; then
    MC_GPU_TEST_DEVICE=cpu MC_GPU_TEST_NO_BUILD=1 MC_BUILD="$MC_BUILD" MC_BIN="$MC_BIN" \
        MC_GPU_TEST_LOGS="$MC_TMP/gpu-logs" ASAN_OPTIONS="$MPI_ASAN_OPTIONS" \
        bash "$ROOT/scripts/gpu-test.sh" >"$MC_TMP/rehearsal" 2>&1
    rc=$?
    check "gpu-test.sh rehearsed on the CPU backend: fp32, bf16 and the three MPI layouts compared, all pass (rc=$rc)" \
        bash -c "[ $rc -eq 0 ] && tail -1 '$MC_TMP/rehearsal' | grep -qx 'gpu-test: 5 passed, 0 failed, 7 skipped' &&
                 grep -q '^ok 7 - dp=2.*max relative differences' '$MC_TMP/rehearsal'"
    check "gpu-test.sh keeps its logs in MC_GPU_TEST_LOGS" test -s "$MC_TMP/gpu-logs/fp32"
    [ $rc -eq 0 ] || sed 's/^/# /' "$MC_TMP/rehearsal" | head -40
else
    skip "gpu-test.sh rehearsed on the CPU backend" "mpirun is not installed"
fi

CUDA_VISIBLE_DEVICES= MC_BIN="$MC_BIN" bash "$ROOT/scripts/bench.sh" >"$MC_TMP/bench-none" 2>&1
rc=$?
check "bench.sh without a GPU: says so, exit 0 (rc=$rc)" \
    bash -c "[ $rc -eq 0 ] && grep -q '^bench.sh: no GPU visible' '$MC_TMP/bench-none' && [ \$(wc -l <'$MC_TMP/bench-none') -eq 1 ]"

# OUT (the device tool's output folder) must survive; BENCH_LOGS names the logs' folder
OUT="$MC_TMP/out-kept" BENCH_LOGS="$MC_TMP/bench-logs" BENCH_SMOKE=1 PYTHON=$PY MC_BIN="$MC_BIN" \
    bash "$ROOT/scripts/bench.sh" >"$MC_TMP/bench" 2>&1
rc=$?
logs=$(sed -n 's/^logs: //p' "$MC_TMP/bench")
check "bench.sh writes its logs and table to BENCH_LOGS (logs: $logs)" \
    bash -c "[ '$logs' = '$MC_TMP/bench-logs' ] && [ -s '$MC_TMP/bench-logs/table.md' ] && [ ! -e '$MC_TMP/out-kept' ]"
num='[0-9]+ \| [0-9.]+ \| [0-9.]+%'
check "bench.sh plumbing (BENCH_SMOKE, CPU): a markdown table with megatron-c's fastest micro batch per model (rc=$rc)" \
    bash -c "[ $rc -eq 0 ] && grep -q '^| model | implementation | micro batch | tokens/s | TFLOP/s | MFU | peak memory |$' '$MC_TMP/bench' &&
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
env_err=$(MC_KIT_TAR="$MC_TMP/none.tar.gz" MC_KIT="$MC_TMP/kit2" bash -c 'source "$1/scripts/device-env.sh"; echo "rc=$?"' _ "$ROOT" 2>&1)
check "device-env.sh without a kit: one line naming it, status 1 ($env_err)" \
    bash -c "[ \$(printf '%s\n' '$env_err' | wc -l) -eq 2 ] && printf '%s' '$env_err' | grep -q 'no $MC_TMP/none.tar.gz' &&
             printf '%s' '$env_err' | grep -qx 'rc=1'"

check "gpt_torch.py counts Megatron's FLOPs (GPT-2 124M, 512 sequences: 418398534107136)" \
    test "$($PY "$ROOT/bench/gpt_torch.py" --print-flops --layers 12 --hidden 768 --heads 12 --seq 1024 --vocab 50304 --global-batch 512)" = 418398534107136
