# TAP helpers for integration tests (sourced). Each check prints one "ok"/"not ok" line.
: "${MC_BIN:?MC_BIN must point at the megatron-c binary}"
MC_TMP=$(mktemp -d)
trap 'rm -rf "$MC_TMP"' EXIT

ok() { echo "ok - $*"; }
not_ok() { echo "not ok - $*"; }
skip() { echo "ok - $1 # SKIP $2"; }
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
