#!/usr/bin/env bash
# The comm layer (comm/runtime.c, comm_single.c, comm_mpi.c) through test/mpi/test_comm_mpi:
# every collective with exact values on the world, pair, strided, partial (n = 0 on some ranks),
# first/last and one-rank groups, asynchronous use, chunked big buffers and volume counters; p2p
# batches (ring, pipeline patterns, both directions with one peer, mixed with collectives in
# flight, zero elements, several MB); all-to-all with variable splits (uneven, zero, a rank moving
# nothing, packed and gapped displacements, every type); device buffers staged through host memory (a fake device
# the process cannot touch: every collective kind in and out of place, in flight, p2p); the
# PMIx exchange that shares NCCL's unique ids; single-rank (no launcher) and under mpirun -np 2,
# 4, 8.
# Then the failure paths: a rank that dies, one that hangs past the timeout and one that calls
# mc_fatal must each end the whole job within 30 s, with a non-zero status and a message naming
# the rank, also while a peer waits for it in a p2p batch; and the single-rank communicator
# refuses p2p it cannot match.
# The NCCL communicator (comm/comm_nccl.c) runs the same checks and more on device buffers
# as test_comm_nccl, over an emulated GPU (test/fake/fake_cuda.c), alone and under mpirun -np 2,
# 4, 8; its watchdog must end the job on a dead rank, a hang past the timeout, mc_fatal and an
# asynchronous NCCL error, and ranks sharing a GPU are one user error.
# ci-sanitize: every collective and fault path under mpirun: comm thread, watchdog, heartbeat ring
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

# single_fatal NAME PATTERN ARGS...: without a launcher, exit 1 with PATTERN on stderr.
single_fatal() {
    local name=$1 pattern=$2
    shift 2
    env -u PMIX_RANK -u PMIX_NAMESPACE "$PROG" "$@" >"$MC_TMP/out" 2>"$MC_TMP/err"
    local rc=$?
    if [ $rc -eq 1 ] && grep -qE -- "$pattern" "$MC_TMP/err"; then
        ok "$name"
    else
        not_ok "$name (rc=$rc, stderr: $(head -c 600 "$MC_TMP/err"))"
    fi
}
single_fatal "1 rank: a p2p send to itself without a receive in the batch is an error" \
    "^megatron-c: rank 0: error: p2p batch on the world group of the single-rank communicator has 1 send\(s\) to itself but 0 receive\(s\)" \
    p2pself 0
single_fatal "1 rank: a p2p send to group rank 1 is an error" \
    "^megatron-c: rank 0: error: p2p send to group rank 1 on the world group of the single-rank communicator \(only rank 0 exists\)" \
    p2ppeer 0
single_fatal "1 rank: an all-to-all sending itself another count than it receives is an error" \
    "^megatron-c: rank 0: error: all-to-all on the world group of the single-rank communicator sends 2 elements to itself but receives 3" \
    a2aself 0

NCCL=$MC_BUILD/test/mpi/test_comm_nccl
if [ -x "$NCCL" ]; then
    # the emulation starts MPI, whose allocations LeakSanitizer would report (mpi.sh)
    run_checks "nccl, 1 rank, no launcher" env -u PMIX_RANK -u PMIX_NAMESPACE ASAN_OPTIONS="$MPI_ASAN_OPTIONS" "$NCCL"
    rc=$?
    want_nccl=$(grep -c '^ok - ' "$MC_TMP/out")
    check "nccl, 1 rank, no launcher: exits 0 after $want_nccl checks, nothing on stderr (rc=$rc)" \
        bash -c "[ $rc -eq 0 ] && grep -q '^ok - group_free' '$MC_TMP/out' && [ ! -s '$MC_TMP/err' ]"
fi

if ! have_mpirun; then
    skip "mpirun runs of the comm test" "mpirun is not installed (scripts/install-deps.sh installs OpenMPI)"
    exit 0
fi


every_check() { # label program want
    local label=$1 prog=$2 want=$3 np
    for np in 2 4 8; do
        run_checks "$label np=$np" "${MPIRUN[@]}" -np "$np" "$prog"
        local rc=$? got
        got=$(grep -c '^ok - ' "$MC_TMP/out")
        if [ $rc -eq 0 ] && [ "$got" -eq "$want" ] && [ ! -s "$MC_TMP/err" ]; then
            ok "$label np=$np: exits 0 after all $want checks, nothing on stderr"
        else
            not_ok "$label np=$np: exits 0 after all $want checks, nothing on stderr (rc=$rc, $got checks, stderr: $(head -c 600 "$MC_TMP/err"))"
        fi
    done
}
every_check mpi "$PROG" "$want"

# comm/state.c's expert-parallel groups (parallel folding) on the MPI communicator
STATE=$MC_BUILD/test/mpi/test_parallel_state
for np in 1 2 4 8; do
    if [ $np = 1 ]; then
        run_checks "parallel state, 1 rank" env -u PMIX_RANK -u PMIX_NAMESPACE "$STATE"
    else
        run_checks "parallel state np=$np" "${MPIRUN[@]}" -np "$np" "$STATE"
    fi
    rc=$?
    check "parallel state np=$np: exits 0, nothing on stderr (rc=$rc)" \
        bash -c "[ $rc -eq 0 ] && grep -q '^ok - ' '$MC_TMP/out' && [ ! -s '$MC_TMP/err' ]"
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
# Only rank 3 is in MPI, waiting for rank 2 in a p2p batch (the others sleep).
fault "a rank killed by SIGKILL while its peer waits in p2p ends the job, naming it" \
    "megatron-c: rank 3: error: rank 2 \(pid [0-9]+ on host [^)]+\) died during p2p on the world group; aborting the job|process rank 2 " \
    p2pdie 2
fault "a rank that hangs past the 2 s timeout while its peer waits in p2p ends the job" \
    "megatron-c: rank 3: error: timed out after 2 s in p2p with rank 2 on the world group of 4 ranks \(a peer stopped responding" \
    p2psleep 2
fault "a p2p receive shorter than the message matched to it ends the job, naming the mismatch" \
    "megatron-c: rank 1: error: MPI_Testall failed in p2p with rank 2 on the world group of 4 ranks: .*truncat.*the ranks' p2p batches do not match" \
    p2pshort 1

# ---- the NCCL communicator on an emulated GPU ----
if [ ! -x "$NCCL" ]; then
    skip "the NCCL communicator on an emulated GPU" "test_comm_nccl is not built (it needs the CUDA and NCCL headers)"
    exit 0
fi
every_check nccl "$NCCL" "$want_nccl"
PROG=$NCCL
went_on=0
# nccl_fault: fault, and no rank went on once the job started ending (the test prints "... returned")
nccl_fault() {
    fault "$@"
    if grep -qE '^rank [0-9]+: the .* returned$' "$MC_TMP/err"; then went_on=$((went_on + 1)); fi
}
nccl_fault "nccl: a rank killed by SIGKILL ends the job, naming it" \
    "megatron-c: rank [0-9]: error: rank 2 \(pid [0-9]+ on host [^)]+\) died during all-reduce on the world group; aborting the job|process rank 2 " \
    die 2
nccl_fault "nccl: a rank that hangs past the 2 s timeout ends the job" \
    "megatron-c: rank [0-9]: error: timed out after 2 s in all-reduce on the world group of 4 ranks \(a peer stopped responding" \
    sleep 1
nccl_fault "nccl: mc_fatal on one rank ends the job, naming the rank" \
    "^megatron-c: rank 3: error: test failure on purpose$" \
    fatal 3
nccl_fault "nccl: a rank killed by SIGKILL while its peer waits in p2p ends the job, naming it" \
    "megatron-c: rank 3: error: rank 2 \(pid [0-9]+ on host [^)]+\) died during p2p with rank 2 on the world group; aborting the job|process rank 2 " \
    p2pdie 2
nccl_fault "nccl: a rank that hangs past the 2 s timeout while its peer waits in p2p ends the job" \
    "megatron-c: rank 3: error: timed out after 2 s in p2p with rank 2 on the world group of 4 ranks \(a peer stopped responding" \
    p2psleep 2
nccl_fault "nccl: an asynchronous NCCL error ends the job, naming the collective" \
    "megatron-c: rank 1: error: NCCL reported an error during all-reduce on the world group of 4 ranks" \
    asyncerr 1
check "nccl: in those faults no rank went on once the job started ending ($went_on did)" test $went_on -eq 0
"${MPIRUN[@]}" -x FAKE_GPU_SHARED=1 -np 2 "$NCCL" >"$MC_TMP/out" 2>"$MC_TMP/err"
rc=$?
check "nccl: ranks sharing a GPU are one user error naming them (rc=$rc)" bash -c "[ $rc -ne 0 ] &&
    [ \$(grep -c '^megatron-c: error: ' '$MC_TMP/err') -eq 1 ] &&
    grep -q '^megatron-c: error: --distributed-backend nccl: ranks 0 and 1 share the GPU .*use --distributed-backend mpi' '$MC_TMP/err'"
