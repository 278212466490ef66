#!/usr/bin/env bash
# Runs every test and prints one closing line: "N passed, M failed[, K skipped]".
# Unit tests are cmocka binaries (TAP output); integration tests are shell scripts printing TAP
# lines ("ok - name", "not ok - name", "ok - name # SKIP why"). A binary or script that dies
# without reporting counts as one failure.
#
# MC_TEST_SET=all (the default: `make test`) runs every program. MC_TEST_SET=sanitize (the
# sanitizer pass: `make test SANITIZE=1 TEST_SET=sanitize`) runs what AddressSanitizer and UBSan
# find things in: every unit test, the emulated op tests and the emulator's own tests, and the
# integration scripts that say why in a "# ci-sanitize: <why>" line of their header (the fuzzers,
# a sample of multi-rank runs, the file parsers). MC_SAN_BUILD (with MC_SAN_EMU_BUILD and
# MC_SAN_EMU_SCHEDS; `make test SANITIZE_TOO=1`, .ci/run) adds the sanitize set against those
# sanitizer builds to the same run, its results named san/...: one pool, one closing line.
# MC_TEST_ONLY="test_a test_b ...", when set, runs only the programs of those names (unit,
# integration or emulated).
#
# MC_TEST_JOBS programs run at once (default: the machine's cores): most are one process, and
# some wait on timers (heartbeats, hung-rank detection), so on CI's two cores two at a time
# halve the wall time. The longest (test/durations.txt) start first. Each program's lines come
# out together when it ends; the order of programs is then the order they end in.
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
: "${MC_TEST_JOBS:=$(nproc 2>/dev/null || echo 1)}"
[[ $MC_TEST_JOBS =~ ^[1-9][0-9]*$ ]] || { echo "test/run.sh: MC_TEST_JOBS is a positive number, not '$MC_TEST_JOBS'" >&2; exit 2; }

passed=0 failed=0 skipped=0
# Each program's seconds, wall clock and CPU (user + sys of everything it started), go on its line
# and the slowest are listed at the end: CI has a time limit, and this is where to look first
# when the suite grows slow. CPU seconds compare across machines and loads; wall seconds are
# what CI waits (with programs side by side, a program's wall seconds include its neighbours').
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
cpu_ms() { # FILE: sets CPU_MS, the CPU milliseconds of this shell's finished children (bash's times)
    local u s t sec
    times >"$1" # not in a subshell: a subshell's children are not this shell's
    { read -r _ _ && read -r u s; } <"$1"
    CPU_MS=0
    for t in "$u" "$s"; do # "1m2.345s"
        sec=${t#*m} && sec=${sec%s}
        CPU_MS=$((CPU_MS + ${t%%m*} * 60000 + 10#${sec%.*} * 1000 + 10#${sec#*.}))
    done
}
cpu_ms "$log/cpu"
wall_all=$SECONDS cpu_all=$CPU_MS
only() { [ -z "${MC_TEST_ONLY:-}" ] || [[ " $MC_TEST_ONLY " == *" $1 "* ]]; } # program name

# ---- inside a job (a background subshell with its directory JOB) ----

# record NAME OUT RC: one result of the job: its output and exit code, with the seconds since
# the job's previous result
record() {
    local n=$((++n_records))
    cp "$2" "$JOB/out.$n"
    cpu_ms "$JOB/cpu"
    echo "$n $3 $((SECONDS - started)) $(((CPU_MS - cpu_started + 500) / 1000)) ${NAME_PREFIX:-}$1" >>"$JOB/records"
    started=$SECONDS cpu_started=$CPU_MS
}
job_program() { # NAME CMD...: one program, one result
    local name=$1
    shift
    "$@" >"$JOB/run" 2>&1
    record "$name" "$JOB/run" $?
}
# The emulated CUDA device (test/emu, built by `make emu` into MC_EMU_BUILD): a GPU op test
# against the CPU op under each schedule of MC_EMU_SCHEDS (a skip there is a failure: the
# device exists), then the device memory after every launch must be the same under all of
# them (a race between synchronisation points shows as a difference).
job_emu() { # the op test binary
    local t=$1 name rc s first
    name=$(basename "$t")
    for s in $MC_EMU_SCHEDS; do
        MC_EMU_SCHED=$s MC_EMU_HASH="$JOB/hash.$s" "$t" >"$JOB/run" 2>&1
        rc=$?
        sed -i -E 's/^(not )?ok (.*)# ?SKIP(.*)$/not ok \2(skipped on the emulated device:\3)/' "$JOB/run"
        record "emu-$s/$name" "$JOB/run" $rc
    done
    first=${MC_EMU_SCHEDS%% *}
    for s in $MC_EMU_SCHEDS; do
        [ "$s" = "$first" ] && continue
        if cmp -s "$JOB/hash.$first" "$JOB/hash.$s" && [ -s "$JOB/hash.$s" ]; then
            echo "ok - device memory identical under $first and $s after each of $(wc -l <"$JOB/hash.$s") launches"
        else
            echo "not ok - device memory differs between $first and $s: $(diff "$JOB/hash.$first" "$JOB/hash.$s" | sed -n 2p)"
        fi >"$JOB/run"
        record "emu-schedules/$name" "$JOB/run" 0
    done
}

# ---- the parent: starts jobs, MC_TEST_JOBS at a time, and counts their results ----

count() { # name, output file, exit code, wall seconds, CPU seconds
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
    printf '%-40s %3d passed, %d failed, %d skipped %5ds %5ds cpu\n' "$name" "$p" "$f" "$s" "$4" "$5"
    echo "$4 $5 $name" >>"$log/times"
}
n_jobs=0
start_job() { # FUNCTION ARGS...
    n_jobs=$((n_jobs + 1))
    local dir=$log/job.$n_jobs
    mkdir -p "$dir"
    (
        trap - EXIT # the parent's: it removes the logs
        JOB=$dir started=$SECONDS n_records=0
        cpu_ms "$dir/cpu"
        cpu_started=$CPU_MS
        "$@"
        touch "$dir/done"
    ) </dev/null &
}
running() { jobs -rp | wc -l; }
report_done() { # counts the results of every job that has ended and was not counted yet
    local d n rc wall cpu name sum
    for d in "$log"/job.*; do
        [ -e "$d/done" ] || continue
        sum=0
        while read -r n rc wall cpu name; do
            count "$name" "$d/out.$n" "$rc" "$wall" "$cpu"
            sum=$((sum + wall))
        done <"$d/records"
        # the job's seconds under the name test/durations.txt knows it by
        [ -z "${MC_TEST_DURATIONS_OUT:-}" ] || echo "$sum $(cat "$d/name")" >>"$MC_TEST_DURATIONS_OUT"
        rm -rf "$d"
    done
}
queue() { # FUNCTION ARGS...: starts it once fewer than MC_TEST_JOBS run
    while [ "$(running)" -ge "$MC_TEST_JOBS" ]; do
        wait -n
        report_done
    done
    start_job "$@"
}

# ---- what to run: jobs "SECONDS|BUILD|NAME|FUNCTION|ARG", longest first ----

# test/durations.txt: each long program's seconds in an earlier run (MC_TEST_DURATIONS_OUT writes
# them). The longest start first, so that none ends the run alone; the others follow in the
# order below (integration scripts, the emulated device's programs, unit tests).
declare -A DURATION=()
if [ -f test/durations.txt ]; then
    while read -r sec name; do
        [[ $sec =~ ^[0-9]+$ ]] && DURATION[$name]=$sec
    done <test/durations.txt
fi
JOB_LIST=()
add_job() { # BUILD NAME FUNCTION ARG: BUILD is rel (MC_BUILD) or san (MC_SAN_BUILD)
    local key=$2
    [ "$1" = san ] && key=san/$2
    JOB_LIST+=("${DURATION[$key]:-0}|$1|$2|$3|$4")
}
# One set of programs against one build and emulated build: SET is all or sanitize.
add_set() { # BUILD SET BUILD_DIR EMU_BUILD_DIR
    local t
    for t in test/integration/test_*.sh; do
        [ -f "$t" ] && only "$(basename "$t" .sh)" || continue
        if [ "$2" = sanitize ] && ! head -30 "$t" | grep -q '^# ci-sanitize: '; then
            left=$((left + 1))
            continue
        fi
        add_job "$1" "integration/$(basename "$t" .sh)" job_program "$t"
    done
    if [ -n "$4" ] && [ -x "$4/megatron-c" ]; then
        for t in "$4"/test/test_gpu_*; do
            [ -x "$t" ] && only "$(basename "$t")" || continue
            add_job "$1" "emu/$(basename "$t")" job_emu "$t"
        done
        for t in "$4"/test/emu/test_emu_*; do
            [ -x "$t" ] && only "$(basename "$t")" || continue
            add_job "$1" "emu/$(basename "$t")" job_program "$t"
        done
    else
        echo "ok - the emulated CUDA device # SKIP not built (make emu needs g++ and the CUDA and NCCL headers)" >"$log/skip"
        count "$([ "$1" = san ] && echo san/)emu" "$log/skip" 0 0 0
    fi
    for t in "$3"/test/test_*; do
        [ -x "$t" ] && only "$(basename "$t")" || continue
        add_job "$1" "unit/$(basename "$t")" job_program "$t"
    done
}
# A job in its build: the programs see that build's MC_BUILD, MC_BIN, MC_EMU_BUILD and schedules;
# the sanitizer build's results are named san/...
in_build() { # BUILD NAME FUNCTION ARG
    if [ "$1" = san ]; then
        export MC_BUILD=$MC_SAN_BUILD MC_BIN=$MC_SAN_BUILD/megatron-c MC_EMU_BUILD=${MC_SAN_EMU_BUILD:-}
        export MC_EMU_SCHEDS=$MC_SAN_EMU_SCHEDS
        NAME_PREFIX=san/
    fi
    echo "${NAME_PREFIX:-}$2" >"$JOB/name"
    case $3 in
    job_emu) job_emu "$4" ;;
    *) case $4 in
       *.sh) job_program "$2" bash "$4" ;;
       *) job_program "$2" "$4" ;;
       esac ;;
    esac
}

left=0
: "${MC_EMU_SCHEDS:=forward warps}"
add_set rel "$MC_TEST_SET" "$MC_BUILD" "${MC_EMU_BUILD:-}"
# MC_SAN_BUILD (.ci/run): the sanitizer pass's programs too, in the same pool (MC_TEST_SET=sanitize
# against MC_SAN_BUILD and MC_SAN_EMU_BUILD, under MC_SAN_EMU_SCHEDS): neither pass ends alone.
if [ -n "${MC_SAN_BUILD:-}" ]; then
    : "${MC_SAN_EMU_SCHEDS:=forward}"
    export MC_SAN_EMU_SCHEDS
    add_set san sanitize "$MC_SAN_BUILD" "${MC_SAN_EMU_BUILD:-}"
fi
# longest first; equal (unlisted) ones keep their order
while IFS='|' read -r _ build name fn arg; do
    queue in_build "$build" "$name" "$fn" "$arg"
done < <(for i in "${!JOB_LIST[@]}"; do echo "${JOB_LIST[i]%%|*} $i"; done | sort -k1,1rn -k2,2n |
         while read -r _ i; do echo "${JOB_LIST[i]}"; done)
while [ "$(running)" -gt 0 ]; do
    wait -n
    report_done
done
wait
report_done
for d in "$log"/job.*; do # a job killed before it ended (its subshell too)
    [ -d "$d" ] || continue
    echo "not ok - a test job ended without finishing: $(cat "$d"/records 2>/dev/null | tail -1)" >"$log/lost"
    count "lost/${d##*/}" "$log/lost" 1 0 0
done

[ "$left" -eq 0 ] || echo "sanitizer set: $left integration scripts left to the release build (no '# ci-sanitize:' line)"
touch "$log/times"
echo "slowest: $(sort -rn "$log/times" | head -8 | awk '{printf "%s %ss (%ss cpu); ", $3, $1, $2}')"
cpu_ms "$log/cpu"
echo "time: $((SECONDS - wall_all)) s wall, $(((CPU_MS - cpu_all + 500) / 1000)) s cpu, $MC_TEST_JOBS at a time (MC_TEST_SET=$MC_TEST_SET${MC_SAN_BUILD:+, and sanitize in $MC_SAN_BUILD})"
if [ "$skipped" -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
