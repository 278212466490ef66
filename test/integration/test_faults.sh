#!/usr/bin/env bash
# A dying or hanging rank during data-parallel training: a rank killed
# with SIGKILL brings the whole job down, non-zero, with a message naming it, within 30 s, under
# mpirun and under srun; a rank that stops responding (SIGSTOP) is named within
# --heartbeat-timeout-seconds (a peer on the node seen stopped that long, or its heartbeat silent
# at its ring successor; 5 s here, 30 s by default), or caught by --distributed-timeout-minutes
# when that check is off; a checkpoint save longer than the heartbeat bound is no false alarm;
# ranks finishing at different times are none either.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

FLAGS=(--device cpu --mock-data --num-layers 2 --hidden-size 32 --num-attention-heads 4
       --seq-length 32 --max-position-embeddings 32 --micro-batch-size 1 --global-batch-size 8
       --train-iters 1000000 --lr 1e-3 --vocab-size 256 --log-interval 1 --eval-iters 0)

# Ends a job of this test that went wrong: its ranks (found by MC_FAULT_JOB, whoever launched
# them) and its launcher, so no 1000000-iteration run outlives the test.
kill_job() {
    local p r
    for r in 0 1 2 3; do
        p=$(rank_pid "$MC_FAULT_JOB" $r)
        [ -n "$p" ] && kill -9 "$p" 2>/dev/null
    done
    kill -9 "$1" 2>/dev/null
    wait "$1" 2>/dev/null
}

# job_fault NAME SIGNAL PATTERN MAX_S LAUNCHER...: start training, wait for iteration 3, send
# SIGNAL to rank $FAULT_RANK (2 unless set), and expect the job to end non-zero within MAX_S seconds with PATTERN on
# stderr or stdout.
job_fault() {
    local name=$1 sig=$2 pattern=$3 max=$4
    shift 4
    export MC_FAULT_JOB=$$.$RANDOM
    # emptied here, not only by the job's redirection: the wait below may read the file before
    # the job's shell truncates it, and the last case's "iteration 3" would end the wait at once
    : >"$MC_TMP/out"
    "$@" "${FLAGS[@]}" >"$MC_TMP/out" 2>"$MC_TMP/err" &
    local job=$! waited=0 pid=""
    # up to 4 minutes for iteration 3: a loaded machine starts 4 ranks slowly
    while [ $waited -lt 2400 ] && kill -0 "$job" 2>/dev/null && ! grep -q 'iteration        3/' "$MC_TMP/out"; do
        sleep 0.1
        waited=$((waited + 1))
    done
    pid=$(rank_pid "$MC_FAULT_JOB" "${FAULT_RANK:-2}")
    if [ -z "$pid" ]; then
        # what the job was doing: ended on its own (and how), or running without that rank
        local state="still running"
        kill -0 "$job" 2>/dev/null || { wait "$job"; state="ended with exit $?"; }
        not_ok "$name (could not find rank ${FAULT_RANK:-2} after $((waited / 10)) s; job $state; stdout: $(tail -c 300 "$MC_TMP/out" | tr '\n' ' '); stderr: $(head -c 400 "$MC_TMP/err"))"
        kill_job "$job"
        return
    fi
    local t0=$SECONDS
    kill "-$sig" "$pid"
    local deadline=$((SECONDS + max + 30))
    while kill -0 "$job" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    local took=$((SECONDS - t0))
    if kill -0 "$job" 2>/dev/null; then
        not_ok "$name (still running after ${took} s; $((waited / 10)) s to iteration 3; stderr: $(head -c 400 "$MC_TMP/err"))"
        kill_job "$job"
        kill -CONT "$pid" 2>/dev/null
        return
    fi
    wait "$job"
    local rc=$?
    kill -9 "$pid" 2>/dev/null # a stopped rank may outlive its launcher
    if [ $rc -ne 0 ] && [ $took -le "$max" ] && cat "$MC_TMP/err" "$MC_TMP/out" | grep -qE -- "$pattern"; then
        ok "$name (exit $rc after ${took} s)"
    else
        not_ok "$name (exit $rc after ${took} s; stderr: $(head -c 800 "$MC_TMP/err"))"
    fi
}

DIED='megatron-c: rank [0-9]: error: rank 2 \(pid [0-9]+ on host [^)]+\) died during [a-z-]+ on the [a-z-]+ group|process rank 2 '
if have_mpirun; then
    job_fault "mpirun: a rank killed with SIGKILL ends the job, naming it" KILL "$DIED" 30 \
        "${MPIRUN[@]}" -x MC_FAULT_JOB -np 4 "$MC_BIN"
    job_fault "mpirun: a rank that stops responding is caught by --distributed-timeout-minutes 1" STOP \
        'megatron-c: rank [0-9]: error: timed out after 60 s in [a-z-]+ on the [a-z-]+ group' 75 \
        "${MPIRUN[@]}" -x MC_FAULT_JOB -np 4 "$MC_BIN" --distributed-timeout-minutes 1 \
        --heartbeat-timeout-seconds 0
    # the bound: 5 s stopped, plus up to a second between checks, plus the abort; the line names
    # the rank, its host and pid
    for np in 2 4; do
        FAULT_RANK=$((np - 1)) job_fault \
            "mpirun -np $np: a stopped rank (SIGSTOP) ends the job within --heartbeat-timeout-seconds 5, naming it" \
            STOP "megatron-c: rank [0-9]: error: rank $((np - 1)) \(host $(hostname), pid [0-9]+\) has not responded for [5-9] s \(stopped or hung" 20 \
            "${MPIRUN[@]}" -x MC_FAULT_JOB -np $np "$MC_BIN" --heartbeat-timeout-seconds 5
    done
else
    skip "faults under mpirun" "mpirun is not installed (scripts/install-deps.sh installs OpenMPI)"
fi
if have_srun; then
    # --kill-on-bad-exit=0, as on clusters that keep Slurm's default. Two things race to end the
    # job, and either names the rank: megatron-c's check of its peers (about once a second) and
    # Slurm's pmix plugin, which aborts the step when a task loses its PMIx connection
    # ("srun: error: <node>: task 2: Killed").
    job_fault "srun: a rank killed with SIGKILL ends the job, naming it" KILL \
        "$DIED|srun: error: [^:]+: task 2: Killed" 30 \
        "${SRUN[@]}" --kill-on-bad-exit=0 -n 4 "$MC_BIN"
else
    skip "faults under srun" "no Slurm here ($(srun_why))"
fi

# A checkpoint save that holds its writer (rank 0) 8 s, longer than the 3 s heartbeat bound, while
# rank 1 waits for it: busy is not silent (neither for the /proc check nor for the heartbeat ring,
# whose beats come from rank 0's comm thread), the job ends normally.
if have_mpirun; then
    SAVE=(--train-iters 4 --save-interval 2 --save "$MC_TMP/slow-save" --heartbeat-timeout-seconds 3)
    t0=$SECONDS
    MC_TEST_CKPT_WRITE_DELAY_MS=8000 "${MPIRUN[@]}" -x MC_TEST_CKPT_WRITE_DELAY_MS -np 2 "$MC_BIN" \
        "${FLAGS[@]}" "${SAVE[@]}" >"$MC_TMP/out" 2>"$MC_TMP/err"
    rc=$? took=$((SECONDS - t0))
    check "mpirun: a checkpoint save held 8 s past a 3 s heartbeat bound is no false alarm (rc=$rc, ${took} s)" \
        bash -c "[ $rc -eq 0 ] && [ $took -ge 16 ] && ! grep -q 'has not responded' '$MC_TMP/err' '$MC_TMP/out'"
    # A normal run of 4 ranks under a 2 s heartbeat: start-up (the ring connects), training and
    # the ranks' exits, one after the other, raise no alarm.
    "${MPIRUN[@]}" -np 4 "$MC_BIN" "${FLAGS[@]}" --train-iters 3 --heartbeat-timeout-seconds 2 \
        >"$MC_TMP/out" 2>"$MC_TMP/err"
    rc=$?
    check "mpirun -np 4: a normal run under a 2 s heartbeat ends cleanly, no false alarm (rc=$rc)" \
        bash -c "[ $rc -eq 0 ] && ! grep -qE 'has not responded|died during' '$MC_TMP/err' '$MC_TMP/out'"
fi

# The communicator alone (test/mpi/test_comm_mpi, and the NCCL watchdog on an emulated GPU): a
# rank that stops itself before an all-reduce is named by the ranks waiting for it within their
# 2 s bound; a rank busy 4 s is no false alarm, and the rank waiting for it naps instead of
# burning a core (under a quarter of its wall time in CPU).
if have_mpirun; then
    for prog in test_comm_mpi test_comm_nccl; do
        bin=$MC_BUILD/test/mpi/$prog
        if [ ! -x "$bin" ]; then
            skip "$prog: stopped and slow ranks" "$prog is not built"
            continue
        fi
        t0=$SECONDS
        "${MPIRUN[@]}" -np 4 "$bin" stop 2 >"$MC_TMP/out" 2>"$MC_TMP/err"
        rc=$? took=$((SECONDS - t0))
        check "$prog: a stopped rank ends the job within 2 s + checks, naming it (rc=$rc, ${took} s)" \
            bash -c "[ $rc -ne 0 ] && [ $took -lt 20 ] && grep -qE '^megatron-c: rank [013]: error: rank 2 \(host $(hostname), pid [0-9]+\) has not responded for [2-4] s \(stopped or hung: .* all-reduce on the world group' '$MC_TMP/err'"
        "${MPIRUN[@]}" -np 2 "$bin" slow 1 >"$MC_TMP/out" 2>"$MC_TMP/err"
        rc=$?
        check "$prog: a rank busy 4 s past a 2 s heartbeat is no false alarm, its peer idles ($(grep -o 'using .* of CPU' "$MC_TMP/err"))" \
            bash -c "[ $rc -eq 0 ] && ! grep -q 'has not responded' '$MC_TMP/err'"
        # The network heartbeat ring alone (the same-node /proc check off, as for a rank on
        # another node): rank 3, the stopped rank's successor, names it within 2 s + ticks.
        t0=$SECONDS
        "${MPIRUN[@]}" -np 4 "$bin" stop 2 ring >"$MC_TMP/out" 2>"$MC_TMP/err"
        rc=$? took=$((SECONDS - t0))
        check "$prog: the heartbeat ring alone names a stopped rank within 2 s + ticks (rc=$rc, ${took} s)" \
            bash -c "[ $rc -ne 0 ] && [ $took -lt 20 ] && grep -qE '^megatron-c: rank 3: error: rank 2 \(host $(hostname), pid [0-9]+\) has not responded for [2-4] s \(stopped or hung: no heartbeat from it .* all-reduce on the world group' '$MC_TMP/err'"
        # Ranks finishing at different times: rank 1 finalizes and exits while rank 2, its ring
        # successor, waits 4 s (past a 2 s heartbeat) for the others: its bye is no silence.
        "${MPIRUN[@]}" -np 4 "$bin" finish 1 >"$MC_TMP/out" 2>"$MC_TMP/err"
        rc=$?
        check "$prog: a rank that finishes first is no false alarm (rc=$rc)" \
            bash -c "[ $rc -eq 0 ] && ! grep -qE 'has not responded|died during' '$MC_TMP/err'"
    done
fi
# The start-up exchange (mc_runtime_connect), before any communicator: rank 1 arrives 30 s late at
# an exchange bounded by 2 s; rank 0 ends the job at the bound, saying so (unbounded, it would
# wait and go on).
if have_mpirun && [ -x "$MC_BUILD/test/mpi/test_comm_mpi" ]; then
    t0=$SECONDS
    "${MPIRUN[@]}" -np 2 "$MC_BUILD/test/mpi/test_comm_mpi" late 1 >"$MC_TMP/out" 2>"$MC_TMP/err"
    rc=$? took=$((SECONDS - t0))
    check "test_comm_mpi: a rank 30 s late at the start-up exchange ends the job at its 2 s bound (rc=$rc, ${took} s)" \
        bash -c "[ $rc -ne 0 ] && [ $took -lt 20 ] && grep -q 'rank 0: timed out after 2 s waiting for every rank to start' '$MC_TMP/err'"
fi
