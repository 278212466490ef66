#!/usr/bin/env bash
# Pipeline parallelism: 1F1B (pp 2, 4), the interleaved schedule (vpp 2, with and
# without overlapped p2p), uneven stages, tied embeddings across stages, pp x dp with the
# distributed optimizer, recomputation, per-token loss, and the full PTD-P layout
# tp 2 x pp 2 x dp 2 with vpp 2, sequence parallelism and the distributed optimizer, under mpirun
# and srun, give the single-rank losses, grad norms and params norms over 24 iterations with
# dropout on (layout-invariant init and dropout, DESIGN decision 6); the warmup/flush p2p overlap,
# the deferred output-layer weight gradients and the first chunk's parameter gather inside the
# optimizer step print the numbers of their layout without them.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

if ! have_mpirun; then
    skip "pipeline-parallel equivalence" "mpirun is not installed (scripts/install-deps.sh installs OpenMPI)"
    exit 0
fi

# 8 layers: pp 4 x vpp 2 has one layer per chunk. 16 sequences per step: 8 microbatches at dp 1,
# 4 at dp 2 (the interleaved schedule needs a multiple of pp).
FLAGS=(--device cpu --mock-data --vocab-size 256 --make-vocab-size-divisible-by 64 --num-layers 8
       --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
       --micro-batch-size 2 --global-batch-size 16 --train-iters 24 --lr 3e-3
       --lr-decay-style cosine --lr-warmup-iters 3 --min-lr 1e-4 --weight-decay 0.1
       --clip-grad 1.0 --log-interval 1 --eval-interval 12 --eval-iters 2 --seed 1234
       --hidden-dropout 0.1 --attention-dropout 0.1 --log-params-norm)

"$MC_BIN" "${FLAGS[@]}" >"$MC_TMP/single" 2>"$MC_TMP/single.err"
check "single-rank reference run (exit 0)" test $? -eq 0
UNTIED=(--untie-embeddings-and-output-weights --disable-bias-linear)
"$MC_BIN" "${FLAGS[@]}" "${UNTIED[@]}" >"$MC_TMP/untied" 2>&1
"$MC_BIN" "${FLAGS[@]}" --calculate-per-token-loss >"$MC_TMP/pertoken" 2>&1

VPP2=(--num-layers-per-virtual-pipeline-stage 2)
layout_equals "pp=2 (1F1B)" "$MC_TMP/single" 2 --pipeline-model-parallel-size 2
cp "$MC_TMP/run" "$MC_TMP/pp2"
inflight_pp2=$(grep -o 'activations ([0-9]* microbatch' "$MC_TMP/run" | grep -o '[0-9]*')
check "memory plan: a pp=2 stage keeps 2 of the 8 microbatches in flight (got '$inflight_pp2')" \
    bash -c "[ '$inflight_pp2' = 2 ] && grep -q 'memory plan (per rank, cpu; pipeline stage [01], the largest)' '$MC_TMP/run'"
layout_equals "pp=4 (1F1B)" "$MC_TMP/single" 4 --pipeline-model-parallel-size 4
layout_equals "pp=2, vpp=2 (interleaved, overlapped p2p)" "$MC_TMP/single" 2 --pipeline-model-parallel-size 2 "${VPP2[@]}"
layout_equals "pp=4, vpp=2 (interleaved, overlapped p2p)" "$MC_TMP/single" 4 --pipeline-model-parallel-size 4 \
    --num-virtual-stages-per-pipeline-rank 2
layout_equals "pp=4, vpp=2 (interleaved, --no-overlap-p2p-communication)" "$MC_TMP/single" 4 \
    --pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2 --no-overlap-p2p-communication
layout_equals "pp=2, uneven stages (3 + 5 layers)" "$MC_TMP/single" 2 --pipeline-model-parallel-size 2 \
    --decoder-first-pipeline-num-layers 3
layout_equals "pp=2 untied, no biases" "$MC_TMP/untied" 2 --pipeline-model-parallel-size 2 "${UNTIED[@]}"
layout_equals "pp=2, per-token loss" "$MC_TMP/pertoken" 2 --pipeline-model-parallel-size 2 --calculate-per-token-loss
layout_equals "pp=2, full recomputation" "$MC_TMP/single" 2 --pipeline-model-parallel-size 2 "${VPP2[@]}" \
    --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
layout_equals "pp=2 x dp=2, distributed optimizer, overlap" "$MC_TMP/single" 4 --pipeline-model-parallel-size 2 \
    --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 2000
PTDP=(--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "${VPP2[@]}" --sequence-parallel
      --use-distributed-optimizer --overlap-grad-reduce --ddp-bucket-size 4000)
layout_equals "PTD-P tp=2 x pp=2 x dp=2, vpp=2, sequence parallel, distributed optimizer" "$MC_TMP/single" 8 "${PTDP[@]}"
check "PTD-P world logged" grep -q 'using world size: 8, data-parallel size: 2, context-parallel size: 1, tensor-model-parallel size: 2, pipeline-model-parallel size: 2' "$MC_TMP/run"
if have_srun; then
    "${SRUN[@]}" -n 8 "$MC_BIN" "${FLAGS[@]}" "${PTDP[@]}" >"$MC_TMP/srun" 2>"$MC_TMP/srun.err"
    rc=$?
    check "PTD-P under srun --mpi=pmix -n 8 exits 0 (rc=$rc)" test $rc -eq 0
    check "PTD-P under srun gives the single-rank losses" same_log_numbers "$MC_TMP/single" "$MC_TMP/srun"
else
    skip "PTD-P under srun --mpi=pmix -n 8" "no Slurm here ($(srun_why))"
fi

# The pipeline's optional overlaps print the numbers of the same layout without them, digit for
# digit: pp 2 x vpp 2 x dp 2 with the distributed optimizer and overlapped gradient reduction and
# parameter gather, then with the first chunk's gather inside the optimizer step, the warmup/flush
# p2p overlap and every output-layer weight gradient deferred to the flush (the same accumulation
# order); and pp 2 with a deferral limit of 3 of the 8 microbatches (those accumulate last).
# test_schedule, test_defer_wgrad and test_param_gather_step show the changed order itself.
same_printed() { diff <(log_numbers "$1") <(log_numbers "$2") >/dev/null && [ "$(log_numbers "$1" | wc -l)" -ge "$3" ]; }
OVL=(--pipeline-model-parallel-size 2 "${VPP2[@]}" --use-distributed-optimizer --overlap-grad-reduce
     --overlap-param-gather --ddp-bucket-size 2000 --train-iters 8 --eval-interval 4)
mpirun_mc 4 "${FLAGS[@]}" "${OVL[@]}" >"$MC_TMP/ovl0" 2>&1
mpirun_mc 4 "${FLAGS[@]}" "${OVL[@]}" --overlap-param-gather-with-optimizer-step \
    --overlap-p2p-communication-warmup-flush --defer-embedding-wgrad-compute >"$MC_TMP/ovl1" 2>&1
check "pp=2 x vpp=2 x dp=2 with --overlap-param-gather-with-optimizer-step --overlap-p2p-communication-warmup-flush --defer-embedding-wgrad-compute prints the numbers without them" \
    same_printed "$MC_TMP/ovl0" "$MC_TMP/ovl1" 8
mpirun_mc 2 "${FLAGS[@]}" --pipeline-model-parallel-size 2 --defer-embedding-wgrad-compute \
    --wgrad-deferral-limit 3 >"$MC_TMP/defer" 2>&1
check "pp=2 with --defer-embedding-wgrad-compute --wgrad-deferral-limit 3 prints the numbers without it" \
    same_printed "$MC_TMP/pp2" "$MC_TMP/defer" 24

# The p2p timers (pipeline idle time) at --timing-log-level 2.
mpirun_mc 2 "${FLAGS[@]}" --train-iters 4 --pipeline-model-parallel-size 2 --timing-log-level 2 \
    >"$MC_TMP/timers" 2>&1
check "--timing-log-level 2 reports forward-recv and backward-recv" \
    bash -c "grep -q '^    forward-recv ' '$MC_TMP/timers' && grep -q '^    backward-recv ' '$MC_TMP/timers'"

# The comparison can fail: a different seed changes the numbers.
mpirun_mc 2 "${FLAGS[@]}" --pipeline-model-parallel-size 2 --seed 99 >"$MC_TMP/other" 2>&1
differs() { ! same_log_numbers "$@"; }
check "a different seed does not compare equal (the check can fail)" differs "$MC_TMP/single" "$MC_TMP/other"

# Megatron's rules, one error line from rank 0 and exit 2.
refused() { # name message np flags...
    local name=$1 msg=$2 np=$3
    shift 3
    mpirun_mc "$np" "${FLAGS[@]}" "$@" >"$MC_TMP/bad" 2>"$MC_TMP/bad.err"
    local rc=$?
    check "$name is refused once with exit 2 (rc=$rc)" bash -c "[ $rc -eq 2 ] && [ \$(grep -c 'megatron-c: error: .*$msg' '$MC_TMP/bad.err') -eq 1 ]"
}
refused "interleaving with microbatches not a multiple of pp" "microbatch" 4 \
    --pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2 --global-batch-size 12
refused "--num-layers not divisible by pp" "divisible" 2 --pipeline-model-parallel-size 2 --num-layers 7
refused "--overlap-param-gather-with-optimizer-step without the interleaved schedule" \
    "--overlap-param-gather-with-optimizer-step only supported with interleaved" 4 \
    --pipeline-model-parallel-size 2 --use-distributed-optimizer --overlap-grad-reduce \
    --overlap-param-gather --overlap-param-gather-with-optimizer-step
refused "--overlap-p2p-communication-warmup-flush without the interleaved schedule" \
    "--overlap-p2p-communication-warmup-flush: .*batch_p2p_comm" 2 --pipeline-model-parallel-size 2 \
    --overlap-p2p-communication-warmup-flush
