#!/usr/bin/env bash
# Tensor parallelism: tp = 2 and 4, each with and without sequence parallelism, and
# tp 2 x dp 2, give the single-rank losses, grad norms and parameter norms over 24 iterations
# with dropout on (layout-invariant init and dropout, DESIGN decision 6), under mpirun.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

if ! have_mpirun; then
    skip "tensor-parallel equivalence" "mpirun is not installed (scripts/install-deps.sh installs OpenMPI)"
    exit 0
fi

# The padded vocabulary depends on tp (a multiple of --make-vocab-size-divisible-by x tp, as in
# Megatron): 256 is padded to 256 for tp 1, 2 and 4 with a divisor of 64, so the models agree.
FLAGS=(--device cpu --mock-data --vocab-size 256 --make-vocab-size-divisible-by 64 --num-layers 2
       --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
       --micro-batch-size 2 --global-batch-size 8 --train-iters 24 --lr 3e-3
       --lr-decay-style cosine --lr-warmup-iters 3 --min-lr 1e-4 --weight-decay 0.1
       --clip-grad 1.0 --log-interval 1 --eval-interval 12 --eval-iters 2 --seed 1234
       --hidden-dropout 0.1 --attention-dropout 0.1 --log-params-norm)


"$MC_BIN" "${FLAGS[@]}" >"$MC_TMP/single" 2>"$MC_TMP/single.err"
check "single-rank reference run (exit 0)" test $? -eq 0

UNTIED=(--untie-embeddings-and-output-weights --disable-bias-linear)
"$MC_BIN" "${FLAGS[@]}" "${UNTIED[@]}" >"$MC_TMP/untied" 2>&1

layout_equals "tp=2" "$MC_TMP/single" 2 --tensor-model-parallel-size 2
mem_tp=$(grep 'activations (1 microbatch' "$MC_TMP/run" | awk '{print $(NF-1)}')
mem_1=$(grep 'activations (1 microbatch' "$MC_TMP/single" | awk '{print $(NF-1)}')
layout_equals "tp=4" "$MC_TMP/single" 4 --tensor-model-parallel-size 4
layout_equals "tp=2, sequence parallel" "$MC_TMP/single" 2 --tensor-model-parallel-size 2 --sequence-parallel
mem_sp=$(grep 'activations (1 microbatch' "$MC_TMP/run" | awk '{print $(NF-1)}')
layout_equals "tp=4, sequence parallel" "$MC_TMP/single" 4 --tensor-model-parallel-size 4 --sequence-parallel
layout_equals "tp=2 untied, no biases" "$MC_TMP/untied" 2 --tensor-model-parallel-size 2 "${UNTIED[@]}"
layout_equals "tp=2 x dp=2" "$MC_TMP/single" 4 --tensor-model-parallel-size 2
layout_equals "tp=2 x dp=2, distributed optimizer, overlap" "$MC_TMP/single" 4 --tensor-model-parallel-size 2 \
    --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 2000
layout_equals "tp=2 x dp=2, sequence parallel, distributed optimizer" "$MC_TMP/single" 4 \
    --tensor-model-parallel-size 2 --sequence-parallel --use-distributed-optimizer
check "tp x dp world logged" grep -q 'using world size: 4, data-parallel size: 2, context-parallel size: 1, tensor-model-parallel size: 2' "$MC_TMP/run"
check "activation memory per rank: tp 1 ($mem_1 MiB) > tp 2 ($mem_tp) > tp 2 with sequence parallelism ($mem_sp)" \
    awk -v a="$mem_1" -v b="$mem_tp" -v c="$mem_sp" 'BEGIN { exit !(a > b && b > c && c > 0) }' 

# The parameters after training, gathered over tp, equal the single-rank model's
# (test/mpi/test_tp_params trains both in one job with the same microbatches).
PROG=${MC_BUILD:-build/rel}/test/mpi/test_tp_params
params() { # name np flags...
    local name=$1 np=$2
    shift 2
    "${MPIRUN[@]}" -np "$np" "$PROG" "$@" >"$MC_TMP/params" 2>"$MC_TMP/params.err"
    local rc=$?
    if [ $rc -eq 0 ] && grep -q '^ok - 28 tensors after 12 steps' "$MC_TMP/params"; then
        ok "$name: gathered parameters equal the single-rank ones after 12 steps"
    else
        not_ok "$name: gathered parameters equal the single-rank ones (rc=$rc; $(grep -m3 '^not ok' "$MC_TMP/params") $(tail -c 300 "$MC_TMP/params.err"))"
    fi
}
params "tp=2" 2 --tensor-model-parallel-size 2
params "tp=4, sequence parallel" 4 --tensor-model-parallel-size 4 --sequence-parallel
params "tp=2 x dp=2, sequence parallel, distributed optimizer" 4 --tensor-model-parallel-size 2 \
    --sequence-parallel --use-distributed-optimizer --overlap-grad-reduce --ddp-bucket-size 1000

# sequence parallelism splits the sequence over tp: it must divide
mpirun_mc 2 "${FLAGS[@]}" --seq-length 33 --max-position-embeddings 33 --tensor-model-parallel-size 2 --sequence-parallel >"$MC_TMP/sp" 2>"$MC_TMP/sp.err"
rc=$?
check "--sequence-parallel with a sequence tp does not divide is refused once (rc=$rc)" bash -c "[ $rc -eq 2 ] && [ \$(grep -c 'megatron-c: error: --seq-length (33) must be divisible by --tensor-model-parallel-size (2) with --sequence-parallel' '$MC_TMP/sp.err') -eq 1 ]"

# a layout that does not fit the world is one error line for the whole job, exit 2
mpirun_mc 3 "${FLAGS[@]}" --tensor-model-parallel-size 2 >"$MC_TMP/w3" 2>"$MC_TMP/w3.err"
rc=$?
check "tp 2 on 3 ranks is refused once (rc=$rc)" bash -c "[ $rc -eq 2 ] && [ \$(grep -c '^megatron-c: error: world size (3) is not divisible by tensor x pipeline x context parallel size (2 x 1 x 1 = 2)' '$MC_TMP/w3.err') -eq 1 ] && [ ! -s '$MC_TMP/w3' ]"

# the untied model is another model, so the comparison can fail
if same_log_numbers "$MC_TMP/single" "$MC_TMP/untied"; then
    not_ok "the comparison can fail (an untied model is not the reference)"
else
    ok "the comparison can fail (an untied model is not the reference)"
fi
