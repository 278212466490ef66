# TAP helpers for integration tests (sourced). Each check prints one "ok"/"not ok" line.
: "${MC_BIN:?MC_BIN must point at the megatron-c binary}"
MC_TMP=$(mktemp -d)
trap 'rm -rf "$MC_TMP"' EXIT

ok() { echo "ok - $*"; }
not_ok() { echo "not ok - $*"; }
skip() { echo "ok - $1 # SKIP $2"; }
# The sanitizer build's run (make SANITIZE=1; CI's san/ set): what only checks files or numbers
# with other programs (torch.load) is left to the release build's run of the same script.
in_sanitizer_build() { [[ $MC_BIN == */san/megatron-c ]]; }
# left_to_release NAME: in the sanitizer build's run, one skip line for NAME and true: the release
# build's run of the same script checks it, the sanitizers take the rest of the script as their
# sample (CI's time budget). Usage: left_to_release "what" || the_check ...
left_to_release() {
    in_sanitizer_build && skip "$1" "the release build's run checks it (the sanitizer build's run of this script takes a sample)"
}
check() { # name, command...
    local name=$1
    shift
    if "$@"; then ok "$name"; else not_ok "$name"; fi
}

# one_error_line NAME PATTERN RC STDERR-FILE: a run that failed (RC != 0) with exactly one
# "megatron-c: ..." line on stderr, matching PATTERN (grep -E); one TAP line. Multi-rank runs add
# their launcher's lines, which do not count.
one_error_line() {
    local name=$1 pattern=$2 rc=$3 file=$4
    if [ "$rc" -ne 0 ] && [ "$(grep -c '^megatron-c: ' "$file")" -eq 1 ] && grep -qE -- "$pattern" "$file"; then
        ok "$name"
    else
        not_ok "$name (rc=$rc, stderr: $(head -c 400 "$file"))"
    fi
}

# same_lines_float32_loss A B: the files' lines are the same, except that each lm loss value
# (and validation PPL) may differ in its last printed digit (relative 1e-6). Megatron's loss
# report is float32: each rank sums its microbatches' (sum, tokens) pairs in float32, then the
# data-parallel ranks' sums are added, so another data-parallel (or context-parallel) size rounds
# it differently, as Megatron's log does; every other number of the line is layout invariant.
# A and B are files (each is read twice).
same_lines_float32_loss() {
    local mask='s/(lm loss( value| PPL)?: )[0-9.E+-]+/\1*/g'
    diff <(sed -E "$mask" "$1") <(sed -E "$mask" "$2") >/dev/null || return 1
    paste -d' ' <(grep -oE 'lm loss( value| PPL)?: [0-9.E+-]+' "$1" | awk '{print $NF}') \
        <(grep -oE 'lm loss( value| PPL)?: [0-9.E+-]+' "$2" | awk '{print $NF}') |
        awk '{ d = $1 - $2; if (d < 0) d = -d; m = $1 < 0 ? -$1 : $1; if (NF != 2 || d > 1e-6 * m) bad++ }
             END { exit bad > 0 }'
}

# every_error_line NAME PATTERN RC FILE: a failure whose stderr lines starting "megatron-c: " (one or
# more: every problem of a line at once) all match PATTERN (grep -E).
every_error_line() {
    local name=$1 pattern=$2 rc=$3 file=$4 n
    n=$(grep -c '^megatron-c: ' "$file")
    if [ "$rc" -ne 0 ] && [ "$n" -ge 1 ] && [ "$(grep '^megatron-c: ' "$file" | grep -cE -- "$pattern")" -eq "$n" ]; then
        ok "$name"
    else
        not_ok "$name (rc=$rc, stderr: $(head -c 400 "$file"))"
    fi
}

# expect_user_error NAME PATTERN ARGS...: megatron-c must exit 2, print exactly one stderr line
# starting with "megatron-c: error: " that matches PATTERN (grep -E), and print nothing on stdout.
expect_user_error() {
    local name=$1 pattern=$2
    shift 2
    "$MC_BIN" "$@" >"$MC_TMP/out" 2>"$MC_TMP/err"
    local rc=$?
    local lines
    lines=$(wc -l <"$MC_TMP/err")
    if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && [ ! -s "$MC_TMP/out" ] &&
        grep -q '^megatron-c: error: ' "$MC_TMP/err" && grep -qE -- "$pattern" "$MC_TMP/err"; then
        ok "$name"
    else
        not_ok "$name (rc=$rc, stderr: $(head -c 300 "$MC_TMP/err"), stdout bytes: $(wc -c <"$MC_TMP/out"))"
    fi
}
