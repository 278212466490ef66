# Launchers for multi-rank integration tests (sourced after lib.sh).
#
# mpirun settings that work in containers and CI (OpenMPI 4.1 as root, 8 ranks on 2 cores):
#   --allow-run-as-root --oversubscribe   CI runs as root; more ranks than cores
#   OMPI_MCA_btl=self,vader               shared memory only: no tcp/openib probing of network
#                                         interfaces and no warnings about missing ones
#   OMPI_MCA_btl_vader_single_copy_mechanism=none
#                                         CMA (process_vm_readv) needs ptrace rights that
#                                         containers often lack ("Read -1, expected ...")
#   OMPI_MCA_rmaps_base_oversubscribe=1   the same as --oversubscribe, for mpiruns in children
# Debian's /etc/openmpi/openmpi-mca-params.conf already excludes ucx, openib and ofi.
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1
# OpenMPI and PMIx keep allocations from MPI_Init/PMIx_Init until exit, which LeakSanitizer
# reports in the SANITIZE=1 build (single-rank runs keep leak detection on). Other ASan checks
# stay on.
MPI_ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
MPIRUN=(timeout 300 mpirun --allow-run-as-root --oversubscribe -x "ASAN_OPTIONS=$MPI_ASAN_OPTIONS")
# --oversubscribe: the test node's jobs share it (slurm-up.sh's partition allows it), so the srun
# runs of programs that test/run.sh runs side by side start at once instead of queueing
SRUN=(timeout 300 srun --mpi=pmix --oversubscribe "--export=ALL,ASAN_OPTIONS=$MPI_ASAN_OPTIONS")

# pid of the megatron-c process of rank R of a job: the one whose environment has the job's
# marker (MC_FAULT_JOB: export it, and pass -x MC_FAULT_JOB to mpirun) and the rank
rank_pid() { # marker rank
    local p env try
    # a few tries: on a loaded machine (CI runs several multi-rank tests at once) one look at
    # /proc has missed a rank that was running
    for try in 1 2 3 4 5 6 7 8 9 10; do
        for p in $(pgrep -f -- "$MC_BIN"); do
            env=$(tr '\0' '\n' 2>/dev/null <"/proc/$p/environ") || continue
            if grep -qx "MC_FAULT_JOB=$1" <<<"$env" && grep -qxE "(PMIX_RANK|OMPI_COMM_WORLD_RANK)=$2" <<<"$env"; then
                echo "$p"
                return 0
            fi
        done
        sleep 0.5
    done
    return 1
}

have_mpirun() { command -v mpirun >/dev/null 2>&1; }
# mpirun_mc NP ARGS...: megatron-c on NP ranks
mpirun_mc() {
    local np=$1
    shift
    "${MPIRUN[@]}" -np "$np" "$MC_BIN" "$@"
}

# Slurm is usable when test/integration/slurm-up.sh brought up a node that is up (idle, or
# running other tests' jobs, which SRUN's --oversubscribe shares it with) and srun knows the
# pmix plugin.
srun_why() {
    if ! command -v srun >/dev/null 2>&1; then echo "srun is not installed"
    elif ! timeout 10 sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then
        echo "no Slurm node up (run test/integration/slurm-up.sh)"
    elif ! timeout 10 srun --mpi=list 2>&1 | grep -q pmix; then echo "srun has no pmix plugin"
    fi
}
have_srun() { [ -z "$(srun_why)" ]; }

# Layout equivalence: the numbers of a training log, one line per logged iteration
# ("loss gradnorm paramsnorm", "-" when --log-params-norm is off) and per validation
# ("valN loss -").
log_numbers() {
    sed -nE 's/.*\| lm loss: ([0-9.E+-]+) \|.*grad norm: ([0-9.]+) \| params norm: ([0-9.]+) \|.*/\1 \2 \3/p; t
             s/.*\| lm loss: ([0-9.E+-]+) \|.*grad norm: ([0-9.]+) \|.*/\1 \2 -/p; t
             s/.*validation loss at iteration ([0-9]+) \| lm loss value: ([0-9.E+-]+) .*/val\1 \2 -/p' "$1"
}
# same_log_numbers REF RUN [MIN]: the same lines, at least MIN (24) iterations, lm and validation
# losses and params norms within 1e-5 relative, grad norms within 1e-4 relative (their sums run in
# another order across ranks).
same_log_numbers() {
    paste -d' ' <(log_numbers "$1") <(log_numbers "$2") | awk -v want="$(log_numbers "$1" | wc -l)" -v min="${3:-24}" '
        function rel(a, b) { d = a - b; if (d < 0) d = -d; m = (a < 0 ? -a : a); return m > 0 ? d / m : d }
        NF != 6 { bad++; next }
        $1 ~ /^val/ { if ($1 != $4 || rel($2, $5) > 1e-5) bad++; n++; next }
        { iters++; if (rel($1, $4) > 1e-5 || rel($2, $5) > 1e-4 || ($3 != "-" && rel($3, $6) > 1e-5) || ($3 == "-") != ($6 == "-")) bad++; n++ }
        END { exit !(n == want && iters >= min && bad == 0) }'
}

# A layout's run gives the reference run's numbers (same_log_numbers, at least
# $LAYOUT_MIN_ITERS iterations: 24 unless set); one TAP line.
layout_equals() { # name reference np flags...: the run under mpirun with "${FLAGS[@]}" first
    local name=$1 ref=$2 np=$3
    shift 3
    mpirun_mc "$np" "${FLAGS[@]}" "$@" >"$MC_TMP/run" 2>"$MC_TMP/run.err"
    local rc=$?
    if [ $rc -ne 0 ]; then
        not_ok "$name exits 0 (rc=$rc: $(tail -c 400 "$MC_TMP/run.err"))"
        return
    fi
    check "$name gives the single-rank losses, grad and params norms" \
        same_log_numbers "$ref" "$MC_TMP/run" "${LAYOUT_MIN_ITERS:-}"
}
