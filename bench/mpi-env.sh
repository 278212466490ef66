# Sourced by the CPU benchmarks under mpirun (bench-cp, -dp, -moe, -pp, -tp, -tp-overlap), from the
# repository root: the binary (made if missing), the launcher and OpenMPI's shared-memory settings
# as test/integration/mpi.sh has them, one OpenBLAS thread per rank.
MC_BIN=${MC_BIN:-./megatron-c}
read -r -a MPIRUN <<<"${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}"
[ -x "$MC_BIN" ] || make -s megatron-c
export OMPI_MCA_btl=${OMPI_MCA_btl:-self,vader} OPENBLAS_NUM_THREADS=1
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
