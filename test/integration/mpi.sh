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
SRUN=(timeout 300 srun --mpi=pmix "--export=ALL,ASAN_OPTIONS=$MPI_ASAN_OPTIONS")

have_mpirun() { command -v mpirun >/dev/null 2>&1; }
# mpirun_mc NP ARGS...: megatron-c on NP ranks
mpirun_mc() {
    local np=$1
    shift
    "${MPIRUN[@]}" -np "$np" "$MC_BIN" "$@"
}

# Slurm is usable when test/integration/slurm-up.sh brought up a node that is idle and srun
# knows the pmix plugin.
srun_why() {
    if ! command -v srun >/dev/null 2>&1; then echo "srun is not installed"
    elif ! timeout 10 sinfo -h -o %t 2>/dev/null | grep -qE 'idle|mix'; then
        echo "no idle Slurm node (run test/integration/slurm-up.sh)"
    elif ! timeout 10 srun --mpi=list 2>&1 | grep -q pmix; then echo "srun has no pmix plugin"
    fi
}
have_srun() { [ -z "$(srun_why)" ]; }
