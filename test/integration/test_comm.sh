#!/usr/bin/env bash
# The comm layer (parallel/runtime.c, comm_single.c, comm_mpi.c) through test/mpi/test_comm_mpi:
# every collective with exact values on the world, pair, strided, partial (n = 0 on some ranks)
# and first/last groups, asynchronous use, chunked big buffers and volume counters; single-rank
# (no launcher) and under mpirun -np 2, 4, 8. Then the failure paths: a rank that dies, one that
# hangs past the timeout and one that calls mc_fatal must each end the whole job within 30 s,
# with a non-zero status and a message naming the rank.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

: "${MC_BUILD:?MC_BUILD must point at the build directory}"
PROG=$MC_BUILD/test/mpi/test_comm_mpi

# TAP lines of the program, prefixed with the run's name; returns the program's status.
run_checks() { # label, command...
    local label=$1
    shift
    "$@" >"$MC_TMP/out" 2>"$MC_TMP/err"
    local rc=$?
    sed -nE "s/^(ok|not ok) - /\1 - $label: /p" "$MC_TMP/out"
    return $rc
}

if [ ! -x "$PROG" ]; then
    not_ok "test program $PROG is built (make tests)"
    exit 0
fi

run_checks "1 rank, no launcher" env -u PMIX_RANK -u PMIX_NAMESPACE "$PROG"
rc=$?
check "1 rank, no launcher: exits 0 (rc=$rc)" test $rc -eq 0
want=$(grep -c '^ok - ' "$MC_TMP/out")

if ! have_mpirun; then
    skip "mpirun runs of the comm test" "mpirun is not installed (scripts/install-deps.sh installs OpenMPI)"
    exit 0
fi


for np in 2 4 8; do
    run_checks "np=$np" "${MPIRUN[@]}" -np "$np" "$PROG"
    rc=$?
    got=$(grep -c '^ok - ' "$MC_TMP/out")
    if [ $rc -eq 0 ] && [ "$got" -eq "$want" ] && [ ! -s "$MC_TMP/err" ]; then
        ok "np=$np: exits 0 after all $want checks, nothing on stderr"
    else
        not_ok "np=$np: exits 0 after all $want checks, nothing on stderr (rc=$rc, $got checks, stderr: $(head -c 600 "$MC_TMP/err"))"
    fi
done

# fault NAME PATTERN ARGS...: the job must end non-zero within 30 s, stderr matching PATTERN.
fault() {
    local name=$1 pattern=$2
    shift 2
    local t0=$SECONDS
    "${MPIRUN[@]}" -np 4 "$PROG" "$@" >"$MC_TMP/out" 2>"$MC_TMP/err"
    local rc=$? took=$((SECONDS - t0))
    if [ $rc -ne 0 ] && [ $took -lt 30 ] && grep -qE -- "$pattern" "$MC_TMP/err"; then
        ok "$name (${took} s)"
    else
        not_ok "$name (rc=$rc after ${took} s, stderr: $(head -c 800 "$MC_TMP/err"))"
    fi
}

# Our liveness check ("rank 2 (pid P on host H) died during ...") and mpirun's own notice race;
# either names the rank.
fault "a rank killed by SIGKILL ends the job, naming it" \
    "megatron-c: rank [0-9]: error: rank 2 \(pid [0-9]+ on host [^)]+\) died during all-reduce on the world group; aborting the job|process rank 2 " \
    die 2
fault "a rank that hangs past the 2 s timeout ends the job" \
    "megatron-c: rank [0-9]: error: timed out after 2 s in all-reduce on the world group of 4 ranks \(a peer stopped responding" \
    sleep 1
fault "mc_fatal on one rank ends the job, naming the rank" \
    "^megatron-c: rank 3: error: test failure on purpose$" \
    fatal 3
