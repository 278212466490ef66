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
check "gpu-test.sh without a GPU: exit 0, all 11 checks skipped (rc=$rc)" bash -c "[ $rc -eq 0 ] &&
    [ \$(grep -c '^ok [0-9]* - .* # SKIP no GPU' '$MC_TMP/none') -eq 11 ] &&
    tail -1 '$MC_TMP/none' | grep -qx 'gpu-test: 0 passed, 0 failed, 11 skipped'"

if have_mpirun; then
    MC_GPU_TEST_DEVICE=cpu MC_GPU_TEST_NO_BUILD=1 MC_BUILD="$MC_BUILD" MC_BIN="$MC_BIN" \
        MC_GPU_TEST_LOGS="$MC_TMP/gpu-logs" ASAN_OPTIONS="$MPI_ASAN_OPTIONS" \
        bash "$ROOT/scripts/gpu-test.sh" >"$MC_TMP/rehearsal" 2>&1
    rc=$?
    check "gpu-test.sh rehearsed on the CPU backend: fp32, bf16 and the three MPI layouts compared, all pass (rc=$rc)" \
        bash -c "[ $rc -eq 0 ] && tail -1 '$MC_TMP/rehearsal' | grep -qx 'gpu-test: 5 passed, 0 failed, 6 skipped' &&
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
[ $rc -eq 0 ] || sed 's/^/# /' "$MC_TMP/bench"
case "$logs" in /tmp/mc-bench.*) rm -rf "$logs" ;; esac

check "gpt_torch.py counts Megatron's FLOPs (GPT-2 124M, 512 sequences: 418398534107136)" \
    test "$($PY "$ROOT/bench/gpt_torch.py" --print-flops --layers 12 --hidden 768 --heads 12 --seq 1024 --vocab 50304 --global-batch 512)" = 418398534107136
