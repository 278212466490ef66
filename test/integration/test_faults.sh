#!/usr/bin/env bash
# A dying or hanging rank during data-parallel training (issue 4, acceptance 5): a rank killed
# with SIGKILL brings the whole job down, non-zero, with a message naming it, within 30 s, under
# mpirun and under srun; a rank that stops responding (SIGSTOP) is caught by
# --distributed-timeout-minutes.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

FLAGS=(--device cpu --mock-data --num-layers 2 --hidden-size 32 --num-attention-heads 4
       --seq-length 32 --max-position-embeddings 32 --micro-batch-size 1 --global-batch-size 8
       --train-iters 1000000 --lr 1e-3 --vocab-size 256 --log-interval 1 --eval-iters 0)

# pid of the megatron-c process of rank R among the descendants of PID (the launcher)
rank_pid() { # launcher_pid rank
    local p
    for p in $(pgrep -f "$MC_BIN" ); do
        if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qxE "(PMIX_RANK|OMPI_COMM_WORLD_RANK)=$2"; then
            # only processes of this job: their launcher is an ancestor
            local a=$p
            while [ "$a" -gt 1 ]; do
                [ "$a" = "$1" ] && { echo "$p"; return 0; }
                a=$(awk '{print $4}' "/proc/$a/stat" 2>/dev/null || echo 1)
            done
        fi
    done
    return 1
}

# job_fault NAME SIGNAL PATTERN MAX_S LAUNCHER...: start training, wait for iteration 3, send
# SIGNAL to rank 2, and expect the job to end non-zero within MAX_S seconds with PATTERN on
# stderr or stdout.
job_fault() {
    local name=$1 sig=$2 pattern=$3 max=$4
    shift 4
    "$@" "${FLAGS[@]}" >"$MC_TMP/out" 2>"$MC_TMP/err" &
    local job=$! waited=0 pid=""
    while [ $waited -lt 600 ] && ! grep -q 'iteration        3/' "$MC_TMP/out"; do
        sleep 0.1
        waited=$((waited + 1))
    done
    pid=$(rank_pid "$job" 2)
    if [ -z "$pid" ]; then
        not_ok "$name (could not find rank 2; stderr: $(head -c 400 "$MC_TMP/err"))"
        kill -9 "$job" 2>/dev/null
        wait "$job" 2>/dev/null
        return
    fi
    local t0=$SECONDS
    kill "-$sig" "$pid"
    local deadline=$((SECONDS + max + 30))
    while kill -0 "$job" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    local took=$((SECONDS - t0))
    if kill -0 "$job" 2>/dev/null; then
        not_ok "$name (still running after ${took} s)"
        pkill -9 -f "$MC_BIN ${FLAGS[0]}" 2>/dev/null
        kill -9 "$job" 2>/dev/null
        wait "$job" 2>/dev/null
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
        "${MPIRUN[@]}" -np 4 "$MC_BIN"
    job_fault "mpirun: a rank that stops responding is caught by --distributed-timeout-minutes 1" STOP \
        'megatron-c: rank [0-9]: error: timed out after 60 s in [a-z-]+ on the [a-z-]+ group' 75 \
        "${MPIRUN[@]}" -np 4 "$MC_BIN" --distributed-timeout-minutes 1
else
    skip "faults under mpirun" "mpirun is not installed (scripts/install-deps.sh installs OpenMPI)"
fi
if have_srun; then
    job_fault "srun: a rank killed with SIGKILL ends the job, naming it" KILL \
        "$DIED|task 2: Killed" 30 "${SRUN[@]}" -n 4 "$MC_BIN"
else
    skip "faults under srun" "no Slurm here ($(srun_why))"
fi
