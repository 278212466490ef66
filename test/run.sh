#!/usr/bin/env bash
# Runs every test and prints one closing line: "N passed, M failed[, K skipped]".
# Unit tests are cmocka binaries (TAP output); integration tests are shell scripts printing TAP
# lines ("ok - name", "not ok - name", "ok - name # SKIP why"). A binary or script that dies
# without reporting counts as one failure.
#
# MC_TEST_SET=all (the default: `make test`) runs every program. MC_TEST_SET=sanitize (the
# sanitizer pass of .ci/run) runs what AddressSanitizer and UBSan find things in: every unit test,
# the emulated op tests and the emulator's own tests, and the integration scripts that say why in
# a "# ci-sanitize: <why>" line of their header (the fuzzers, a sample of multi-rank runs, the
# file parsers); the release pass runs everything. MC_TEST_ONLY="test_a test_b ...", when set, runs
# only the programs of those names (unit, integration or emulated).
set -u
cd "$(dirname "$0")/.."
: "${MC_BUILD:=$PWD/build/rel}"
: "${MC_BIN:=$MC_BUILD/megatron-c}"
: "${MEGATRON_C_SHARED:=$PWD/../shared}"
export MC_BUILD MC_BIN MEGATRON_C_SHARED MC_FIXTURES="$PWD/test/fixtures"
export CMOCKA_MESSAGE_OUTPUT=TAP
# One BLAS thread: the CI machine has two cores and results must not depend on thread count.
export OPENBLAS_NUM_THREADS=1
: "${MC_TEST_SET:=all}"
case $MC_TEST_SET in
all | sanitize) ;;
*) echo "test/run.sh: MC_TEST_SET is all or sanitize, not '$MC_TEST_SET'" >&2; exit 2 ;;
esac

passed=0 failed=0 skipped=0
# Each program's seconds, wall clock and CPU (user + sys of everything it started), go on its line
# and the slowest are listed at the end: CI has a time limit, and this is where to look first
# when the suite grows slow. CPU seconds compare across machines and loads; wall seconds are
# what CI waits.
started=$SECONDS
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
cpu_ms() { # sets CPU_MS: the CPU milliseconds of this shell's finished children (bash's times)
    local u s t sec
    times >"$log/cpu" # not in a subshell: a subshell's children are not this shell's
    { read -r _ _ && read -r u s; } <"$log/cpu"
    CPU_MS=0
    for t in "$u" "$s"; do # "1m2.345s"
        sec=${t#*m} && sec=${sec%s}
        CPU_MS=$((CPU_MS + ${t%%m*} * 60000 + 10#${sec%.*} * 1000 + 10#${sec#*.}))
    done
}
cpu_ms
cpu_started=$CPU_MS wall_all=$SECONDS cpu_all=$CPU_MS
only() { [ -z "${MC_TEST_ONLY:-}" ] || [[ " $MC_TEST_ONLY " == *" $1 "* ]]; } # program name

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
    cpu_ms
    local wall=$((SECONDS - started)) cpu=$(((CPU_MS - cpu_started + 500) / 1000))
    printf '%-40s %3d passed, %d failed, %d skipped %5ds %5ds cpu\n' "$name" "$p" "$f" "$s" "$wall" "$cpu"
    echo "$wall $cpu $name" >>"$log/times"
    started=$SECONDS cpu_started=$CPU_MS
}

for t in "$MC_BUILD"/test/test_*; do
    [ -x "$t" ] && only "$(basename "$t")" || continue
    name=unit/$(basename "$t")
    "$t" >"$log/out" 2>&1
    count "$name" "$log/out" $?
done
left=0
for t in test/integration/test_*.sh; do
    [ -f "$t" ] && only "$(basename "$t" .sh)" || continue
    if [ "$MC_TEST_SET" = sanitize ] && ! head -30 "$t" | grep -q '^# ci-sanitize: '; then
        left=$((left + 1))
        continue
    fi
    name=integration/$(basename "$t" .sh)
    bash "$t" >"$log/out" 2>&1
    count "$name" "$log/out" $?
done

# The emulated CUDA device (test/emu, built by `make emu` into MC_EMU_BUILD): every GPU op test
# against the CPU op under each schedule of MC_EMU_SCHEDS (a skip there is a failure: the
# device exists), then the device memory after every launch must be the same under all of
# them (a race between synchronisation points shows as a difference).
: "${MC_EMU_SCHEDS:=forward warps}"
emu_program() { # the op test binary
    local t=$1 name rc s first
    name=$(basename "$t")
    for s in $MC_EMU_SCHEDS; do
        MC_EMU_SCHED=$s MC_EMU_HASH="$log/hash.$s" "$t" >"$log/out" 2>&1
        rc=$?
        sed -i -E 's/^(not )?ok (.*)# ?SKIP(.*)$/not ok \2(skipped on the emulated device:\3)/' "$log/out"
        count "emu-$s/$name" "$log/out" $rc
    done
    first=${MC_EMU_SCHEDS%% *}
    for s in $MC_EMU_SCHEDS; do
        [ "$s" = "$first" ] && continue
        if cmp -s "$log/hash.$first" "$log/hash.$s" && [ -s "$log/hash.$s" ]; then
            echo "ok - device memory identical under $first and $s after each of $(wc -l <"$log/hash.$s") launches"
        else
            echo "not ok - device memory differs between $first and $s: $(diff "$log/hash.$first" "$log/hash.$s" | sed -n 2p)"
        fi >"$log/out"
        count "emu-schedules/$name" "$log/out" 0
    done
}
if [ -n "${MC_EMU_BUILD:-}" ] && [ -x "$MC_EMU_BUILD/megatron-c" ]; then
    for t in "$MC_EMU_BUILD"/test/test_gpu_*; do
        [ -x "$t" ] && only "$(basename "$t")" || continue
        n=$(basename "$t")
        emu_program "$t"
    done
    for t in "$MC_EMU_BUILD"/test/emu/test_emu_*; do
        [ -x "$t" ] && only "$(basename "$t")" || continue
        "$t" >"$log/out" 2>&1
        count "emu/$(basename "$t")" "$log/out" $?
    done
else
    echo "ok - the emulated CUDA device # SKIP not built (make emu needs g++ and the CUDA and NCCL headers)" >"$log/out"
    count emu "$log/out" 0
fi

[ "$left" -eq 0 ] || echo "MC_TEST_SET=$MC_TEST_SET: $left integration scripts left to the release pass (no '# ci-sanitize:' line)"
echo "slowest: $(sort -rn "$log/times" | head -8 | awk '{printf "%s %ss (%ss cpu); ", $3, $1, $2}')"
cpu_ms
echo "time: $((SECONDS - wall_all)) s wall, $(((CPU_MS - cpu_all + 500) / 1000)) s cpu (MC_TEST_SET=$MC_TEST_SET)"
if [ "$skipped" -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
