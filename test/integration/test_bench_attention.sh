#!/usr/bin/env bash
# bench_attention (bench/bench_attention.c), the CUDA attention benchmark: without CUDA or a
# GPU it says so on one line and exits 1; with a GPU a quick run prints its table; bad arguments
# get a usage line and status 2.
set -u
source "$(dirname "$0")/lib.sh"
tool="$MC_BUILD/bench/bench_attention"

if [ ! -x "$tool" ]; then
    not_ok "bench_attention is built ($tool)"
    exit 0
fi

"$tool" --quick >"$MC_TMP/out" 2>"$MC_TMP/err"
rc=$?
if grep -qE '^bench_attention: (this build has no CUDA|no CUDA device visible)' "$MC_TMP/err"; then
    check "without a GPU: one line on stderr, status 1, nothing on stdout" \
        test "$rc" -eq 1 -a "$(wc -l <"$MC_TMP/err")" -eq 1 -a ! -s "$MC_TMP/out"
else
    check "a quick run on the GPU prints a row with TFLOP/s (rc=$rc: $(head -c 200 "$MC_TMP/err"))" \
        grep -qE '^gpt-124m +128 +1 +12 +64 +[0-9.]+ +[0-9.]+' "$MC_TMP/out"
fi

"$tool" --dtype bf17 >"$MC_TMP/out" 2>"$MC_TMP/err"
rc=$?
check "a bad --dtype: status 2 and a usage line" \
    test "$rc" -eq 2 -a "$(grep -c '^bench_attention: --dtype takes bf16, fp16 or fp32 (usage: ' "$MC_TMP/err")" -eq 1
