#!/usr/bin/env bash
# Bad numbers, the fp32 part: --check-for-nan-in-loss-and-grad (on by
# default) stops the job at the first NaN or Inf in the loss or the gradient norm with one line
# naming the rank and the iteration, before the optimizer step; with
# --no-check-for-nan-in-loss-and-grad training goes on, as Megatron's does.
#  - a real input makes the loss NaN: --lr 1e9 blows the weights up in one step;
#  - the gradient norm is reached with MC_TEST_GRAD_POISON (train/step.c), since real inputs
#    make the loss non-finite first.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

FLAGS=(--device cpu --mock-data --vocab-size 256 --num-layers 2 --hidden-size 32
       --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32 --micro-batch-size 2
       --global-batch-size 8 --train-iters 6 --lr 1e-3 --log-interval 1 --eval-iters 0)

# stops NAME PATTERN LAST NP ARGS...: exit 1, exactly one megatron-c line, matching PATTERN,
# and iteration LAST is the last one logged (the failing one is not).
stops() {
    local name=$1 pattern=$2 last=$3 np=$4
    shift 4
    if [ "$np" -eq 1 ]; then
        "$MC_BIN" "${FLAGS[@]}" "$@"
    else
        "${MPIRUN[@]}" -x MC_TEST_GRAD_POISON="${MC_TEST_GRAD_POISON:-}" -np "$np" "$MC_BIN" "${FLAGS[@]}" "$@"
    fi >"$MC_TMP/out" 2>"$MC_TMP/err"
    local rc=$? lines logged
    lines=$(grep -c '^megatron-c:' "$MC_TMP/err")
    logged=$(grep -oE 'iteration +[0-9]+/' "$MC_TMP/out" | tail -n 1 | tr -dc 0-9)
    if [ $rc -ne 0 ] && [ "$lines" -eq 1 ] && grep -qE -- "^megatron-c: $pattern" "$MC_TMP/err" &&
        [ "${logged:-0}" -eq "$last" ]; then
        ok "$name"
    else
        not_ok "$name (rc=$rc, $lines lines, last iteration logged '$logged', stderr: $(grep '^megatron-c' "$MC_TMP/err" | head -c 400))"
    fi
}
HINT='\(lower --lr, or check the data; --no-check-for-nan-in-loss-and-grad trains on\)$'

stops "a NaN loss stops the job at its iteration with one line naming the rank" \
    "rank 0: error: found NaN in local forward loss calculation at iteration 2 $HINT" 1 1 --lr 1e9
MC_TEST_GRAD_POISON=3:inf stops "an Inf gradient norm stops the job at its iteration" \
    "rank 0: error: found Inf in the gradient norm at iteration 3 $HINT" 2 1
MC_TEST_GRAD_POISON=4:nan stops "a NaN gradient norm stops the job at its iteration" \
    "rank 0: error: found NaN in the gradient norm at iteration 4 $HINT" 3 1

# --no-check-for-nan-in-loss-and-grad: the NaN goes into the weights and training goes on to the
# end (the loss leaves the log line, as in Megatron, and the grad norm shows nan)
"$MC_BIN" "${FLAGS[@]}" --lr 1e9 --no-check-for-nan-in-loss-and-grad >"$MC_TMP/on" 2>&1
rc=$?
check "--no-check-for-nan-in-loss-and-grad: training goes on through NaN to the last iteration (rc=$rc)" \
    bash -c "[ $rc -eq 0 ] && grep -q 'iteration        6/       6 .*grad norm: nan' '$MC_TMP/on' && ! grep -q '^megatron-c:' '$MC_TMP/on'"

if have_mpirun; then
    # every data-parallel rank's loss is NaN at once: still one line, from the lowest rank
    stops "dp 2: a NaN loss on every rank gives one line, from rank 0" \
        "rank 0: error: found NaN in local forward loss calculation at iteration 2 $HINT" 1 2 --lr 1e9
    # pp 2: only the last stage computes the loss; it names itself
    stops "pp 2: the last stage's NaN loss is reported by it (rank 1), once" \
        "rank 1: error: found NaN in local forward loss calculation at iteration 2 $HINT" 1 2 \
        --lr 1e9 --pipeline-model-parallel-size 2
    # tp 2: rank 1's own gradients are non-finite; rank 0's are not
    MC_TEST_GRAD_POISON=3:nan:1 stops "tp 2: rank 1's NaN gradients are reported by rank 1, once" \
        "rank 1: error: found NaN in the gradient norm at iteration 3 $HINT" 2 2 --tensor-model-parallel-size 2
else
    skip "NaN checks over several ranks" "mpirun is not installed (scripts/install-deps.sh installs OpenMPI)"
fi
exit 0
