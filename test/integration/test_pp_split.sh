#!/usr/bin/env bash
# The account-for pipeline splits (--account-for-embedding-in-pipeline-split,
# --account-for-loss-in-pipeline-split) under mpirun: each run gives the single-rank run's
# losses, grad and params norms with the same layers (layout invariance, DESIGN decision 6),
# including stages that hold the embedding or the loss and no transformer layer; the last
# stage's parameter count shows the split; a torch_dist checkpoint saved by such a split loads
# on one rank, a legacy one on the same split, and converted to pp 1 and to another account-for
# split, and training continues the same; export-hf gathers the split whole. The split
# itself is checked against Megatron's own functions in test/unit/parallel/test_pp_split.c.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

if ! have_mpirun; then
    skip "account-for pipeline splits" "mpirun is not installed (scripts/install-deps.sh installs OpenMPI)"
    exit 0
fi

# Tiny: 8 iterations of 4 microbatches; the layer count is given per case.
FLAGS=(--device cpu --mock-data --vocab-size 256 --make-vocab-size-divisible-by 64
       --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
       --micro-batch-size 2 --global-batch-size 8 --train-iters 8 --lr 3e-3
       --lr-decay-style cosine --lr-warmup-iters 2 --min-lr 1e-4 --weight-decay 0.1
       --clip-grad 1.0 --log-interval 1 --eval-iters 0 --seed 1234
       --hidden-dropout 0.1 --attention-dropout 0.1 --log-params-norm)
EMB=--account-for-embedding-in-pipeline-split
LOSS=--account-for-loss-in-pipeline-split

for L in 2 5 6; do
    "$MC_BIN" "${FLAGS[@]}" --num-layers "$L" >"$MC_TMP/single$L" 2>&1
    check "single-rank reference run, $L layers (exit 0)" test $? -eq 0
done

# The last stage's parameters (the line counts the rank that logs): a layer is 12704, the
# final norm and the tied output layer 8256.
last_stage_layers() { # run layers
    check "the last stage holds $2 transformer layers" \
        grep -q "model parallel rank (0, 0): $((8256 + 12704 * $2))\$" "$1"
}

LAYOUT_MIN_ITERS=8 # layout_equals (mpi.sh)

# pp 4, 2 layers + embedding + loss: [E] [0] [1] [L], two stages without a transformer layer
layout_equals "pp=4, embedding and loss stages alone" "$MC_TMP/single2" 4 --num-layers 2 \
    --pipeline-model-parallel-size 4 "$EMB" "$LOSS"
last_stage_layers "$MC_TMP/run" 0
check "the flags are in the arguments Megatron prints" \
    bash -c "grep -q '^  account_for_embedding_in_pipeline_split \.* True' '$MC_TMP/run' &&
             grep -q '^  account_for_loss_in_pipeline_split \.* True' '$MC_TMP/run'"
# pp 2 x vpp 2, 6 layers + embedding + loss: rank 0 [E 0] [3 4], rank 1 [1 2] [5 L]
layout_equals "pp=2, vpp=2, embedding and loss counted" "$MC_TMP/single6" 2 --num-layers 6 \
    --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 "$EMB" "$LOSS"
last_stage_layers "$MC_TMP/run" 3
# pp 3, 5 layers + loss: [0 1] [2 3] [4 L]
layout_equals "pp=3, loss counted" "$MC_TMP/single5" 3 --num-layers 5 \
    --pipeline-model-parallel-size 3 "$LOSS"
last_stage_layers "$MC_TMP/run" 1

# Checkpoints of the pp 4 split: iterations 5, 7, 8 after loading at 4 equal the run that did
# not stop (a resumed run's second line also counts its first iteration: 6 is left out).
resumed() {
    sed -nE '/iteration +(5|7|8)\/ +8 \|/{s/^ \[[^]]*\]//; s/ elapsed time per iteration \(ms\): [0-9.]+ \|//; p}' "$1"
}
PP4=(--num-layers 2 --pipeline-model-parallel-size 4 "$EMB" "$LOSS")
resume_equals() { # name load-np save-dir load flags...
    local name=$1 np=$2 dir=$3
    shift 3
    if [ "$np" -eq 1 ]; then "$MC_BIN" "${FLAGS[@]}" "$@" --load "$dir" --ckpt-step 4 >"$MC_TMP/load" 2>&1
    else mpirun_mc "$np" "${FLAGS[@]}" "$@" --load "$dir" --ckpt-step 4 >"$MC_TMP/load" 2>&1; fi
    local rc=$?
    if [ $rc -eq 0 ] && [ "$(resumed "$MC_TMP/load" | wc -l)" -eq 3 ] &&
        diff <(resumed "$MC_TMP/single2") <(resumed "$MC_TMP/load") >"$MC_TMP/diff"; then
        ok "$name: iterations 5..8 after loading equal the run that did not stop"
    else
        not_ok "$name (rc=$rc): $(head -c 600 "$MC_TMP/diff") $(grep -h error "$MC_TMP/load" | head -c 300)"
    fi
}
mpirun_mc 4 "${FLAGS[@]}" "${PP4[@]}" --ckpt-format torch_dist --save "$MC_TMP/dist" \
    --save-interval 4 >"$MC_TMP/save" 2>&1
check "torch_dist save by the pp 4 split (exit 0)" test $? -eq 0
resume_equals "torch_dist from the pp 4 split to one rank" 1 "$MC_TMP/dist" --num-layers 2
mpirun_mc 4 "${FLAGS[@]}" "${PP4[@]}" --save "$MC_TMP/legacy" --save-interval 4 >"$MC_TMP/save" 2>&1
check "legacy save by the pp 4 split (exit 0)" test $? -eq 0
resume_equals "legacy checkpoint on the pp 4 split" 4 "$MC_TMP/legacy" "${PP4[@]}"

# convert-checkpoint follows the split: to one rank (the flags dropped with the layout), and to
# pp 3 with the loss counted ([0] [1] [L]).
"$MC_BIN" convert-checkpoint --load-dir "$MC_TMP/legacy" --save-dir "$MC_TMP/conv1" --ckpt-step 4 \
    --target-pipeline-parallel-size 1 >"$MC_TMP/conv" 2>&1
check "convert the pp 4 split to pp 1 (exit 0)" test $? -eq 0
resume_equals "converted from the pp 4 split to one rank" 1 "$MC_TMP/conv1" --num-layers 2
# export-hf gathers the whole model across the split: the same tensors as from pp 1
"$MC_BIN" export-hf --load "$MC_TMP/legacy" --ckpt-step 4 --output "$MC_TMP/hf4" >"$MC_TMP/hf" 2>&1 &&
    "$MC_BIN" export-hf --load "$MC_TMP/conv1" --output "$MC_TMP/hf1" >>"$MC_TMP/hf" 2>&1
check "export-hf of the pp 4 split writes the tensors of its pp 1 conversion" \
    cmp "$MC_TMP/hf4/model.safetensors" "$MC_TMP/hf1/model.safetensors"
"$MC_BIN" convert-checkpoint --load-dir "$MC_TMP/legacy" --save-dir "$MC_TMP/conv3" --ckpt-step 4 \
    --target-pipeline-parallel-size 3 --target-account-for-loss-in-pipeline-split >"$MC_TMP/conv" 2>&1
check "convert the pp 4 split to pp 3 with the loss counted (exit 0)" test $? -eq 0
resume_equals "converted to pp 3, loss counted" 3 "$MC_TMP/conv3" --num-layers 2 \
    --pipeline-model-parallel-size 3 "$LOSS"
# the same 3 stages with the embedding counted in place of the loss split the layers otherwise
mpirun_mc 3 "${FLAGS[@]}" --num-layers 2 --pipeline-model-parallel-size 3 "$EMB" --load "$MC_TMP/conv3" \
    --ckpt-step 4 >"$MC_TMP/other" 2>&1
rc=$?
check "a legacy checkpoint of the loss-counted split is refused with the embedding counted (rc=$rc)" \
    bash -c "[ $rc -eq 2 ] && grep -q 'megatron-c: error: .*saved with account_for_embedding_in_pipeline_split 0 but this run has 1' '$MC_TMP/other'"
"$MC_BIN" convert-checkpoint --load-dir "$MC_TMP/legacy" --save-dir "$MC_TMP/conv2" --ckpt-step 4 \
    --target-pipeline-parallel-size 2 --target-account-for-loss-in-pipeline-split >"$MC_TMP/conv" 2>&1
rc=$?
check "convert to a split that cannot be made is refused with exit 2 (rc=$rc)" \
    bash -c "[ $rc -eq 2 ] && grep -q 'megatron-c: error: .*--account-for-loss-in-pipeline-split' '$MC_TMP/conv'"

# The comparison can fail: the loss stage with a layer less is another model.
mpirun_mc 3 "${FLAGS[@]}" --num-layers 4 --pipeline-model-parallel-size 3 "$LOSS" \
    >"$MC_TMP/other" 2>&1
differs() { ! same_log_numbers "$@"; }
check "4 layers do not compare equal to 5 (the check can fail)" differs "$MC_TMP/single5" "$MC_TMP/other" 8

# A split that cannot be made: one error line from rank 0, exit 2.
mpirun_mc 2 "${FLAGS[@]}" --num-layers 6 --pipeline-model-parallel-size 2 "$EMB" \
    >"$MC_TMP/bad" 2>"$MC_TMP/bad.err"
rc=$?
check "7 counted layers over 2 stages are refused once with exit 2 (rc=$rc)" \
    bash -c "[ $rc -eq 2 ] && [ \$(grep -c 'megatron-c: error: .*$EMB' '$MC_TMP/bad.err') -eq 1 ]"
