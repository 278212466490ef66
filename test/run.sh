#!/usr/bin/env bash
# Runs every test and prints one closing line: "N passed, M failed[, K skipped]".
# Unit tests are cmocka binaries (TAP output); integration tests are shell scripts printing TAP
# lines ("ok - name", "not ok - name", "ok - name # SKIP why"). A binary or script that dies
# without reporting counts as one failure.
set -u
cd "$(dirname "$0")/.."
: "${MC_BUILD:=$PWD/build/rel}"
: "${MC_BIN:=$MC_BUILD/megatron-c}"
: "${MEGATRON_C_SHARED:=$PWD/../shared}"
export MC_BUILD MC_BIN MEGATRON_C_SHARED MC_FIXTURES="$PWD/test/fixtures"
export CMOCKA_MESSAGE_OUTPUT=TAP
# One BLAS thread: the CI machine has two cores and results must not depend on thread count.
export OPENBLAS_NUM_THREADS=1

passed=0 failed=0 skipped=0
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

count() { # name, output file, exit code
    local name=$1 out=$2 rc=$3 p f s
    # cmocka 1.1 prints a skipped test as "not ok N # SKIP": a skip, not a failure.
    p=$(grep -E '^ok ' "$out" | grep -cvE '# ?SKIP')
    s=$(grep -cE '^(not )?ok .*# ?SKIP' "$out")
    f=$(grep -E '^not ok ' "$out" | grep -cvE '# ?SKIP')
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
        echo "FAILED: $name exited with status $rc without reporting a failed test"
    fi
    if [ "$f" -gt 0 ]; then
        echo "---- $name ----"
        cat "$out"
        echo "----"
    fi
    grep -E '^not ok ' "$out" | grep -vE '# ?SKIP' | sed "s|^|$name: |"
    grep -E '^(not )?ok .*# ?SKIP' "$out" | sed "s|^|$name: |"
    passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
    printf '%-40s %3d passed, %d failed, %d skipped\n' "$name" "$p" "$f" "$s"
}

for t in "$MC_BUILD"/test/test_*; do
    [ -x "$t" ] || continue
    name=unit/$(basename "$t")
    "$t" >"$log/out" 2>&1
    count "$name" "$log/out" $?
done
for t in test/integration/test_*.sh; do
    [ -f "$t" ] || continue
    name=integration/$(basename "$t" .sh)
    bash "$t" >"$log/out" 2>&1
    count "$name" "$log/out" $?
done

if [ "$skipped" -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
