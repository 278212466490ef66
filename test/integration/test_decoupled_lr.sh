#!/usr/bin/env bash
# --decoupled-lr / --decoupled-min-lr, as Megatron's is_decoupled_lr parameter group:
# the word embeddings and output layer follow the scheduler with their own max and min lr (the
# log's "decoupled learning rate"), the other parameters --lr; the group is saved and loaded with
# the optimizer state (also the distributed optimizer's), and tp 2 and pp 2 give one rank's losses.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

FLAGS=(--device cpu --mock-data --vocab-size 128 --num-layers 2 --hidden-size 32
       --num-attention-heads 4 --seq-length 16 --max-position-embeddings 16 --micro-batch-size 2
       --make-vocab-size-divisible-by 64
       --global-batch-size 4 --train-iters 6 --lr 3e-3 --lr-decay-style cosine --lr-warmup-iters 2
       --min-lr 1e-4 --weight-decay 0.1 --clip-grad 1.0 --log-interval 1 --eval-iters 0
       --seed 1234 --hidden-dropout 0.1 --attention-dropout 0.1)
DEC=(--decoupled-lr 6e-3 --decoupled-min-lr 2e-4)
run() { # out args...: one rank, exit status checked by the caller
    local out=$1
    shift
    "$MC_BIN" "${FLAGS[@]}" "$@" >"$MC_TMP/$out" 2>"$MC_TMP/$out.err"
}
column() { sed -nE "s/.*\| $1: ([0-9.E+-]+) \|.*/\1/p" "$2" | tr '\n' ' '; }

run base && run dec "${DEC[@]}" && run lr6 --lr 6e-3 --min-lr 2e-4
check "runs with and without --decoupled-lr exit 0" test $? -eq 0
check "the log line shows ' decoupled learning rate: ' after the learning rate" \
    grep -qE '\| learning rate: [0-9.E+-]+ \| decoupled learning rate: [0-9.E+-]+ \| global batch size:' "$MC_TMP/dec"
check "the decoupled group follows the schedule with --decoupled-lr / --decoupled-min-lr" \
    test "$(column 'decoupled learning rate' "$MC_TMP/dec")" = "$(column 'learning rate' "$MC_TMP/lr6")"
check "the other parameters keep --lr's schedule" \
    test "$(column 'learning rate' "$MC_TMP/dec")" = "$(column 'learning rate' "$MC_TMP/base")"
check "without --decoupled-lr the line has no decoupled learning rate" \
    test "$(grep -c 'decoupled learning rate' "$MC_TMP/base")" -eq 0
run same --decoupled-lr 3e-3 --decoupled-min-lr 1e-4
check "--decoupled-lr equal to --lr (and min) gives the losses of a run without it" \
    test "$(log_numbers "$MC_TMP/same")" = "$(log_numbers "$MC_TMP/base")"
check "another --decoupled-lr changes the losses" \
    test "$(log_numbers "$MC_TMP/dec")" != "$(log_numbers "$MC_TMP/base")"
run min --decoupled-lr 6e-3
check "--decoupled-min-lr defaults to --min-lr" test \
    "$(column 'decoupled learning rate' "$MC_TMP/min" | awk '{print $NF}')" = "1.000000E-04"

# --decoupled-lr 0 --decoupled-min-lr 0 freezes the word embeddings and the output layer, and
# the saved optimizer has Megatron's third group (first on the stage with the word embeddings).
TOOL=${MC_BUILD:-build/rel}/test/tools/ckpt_tool
if [ -x "$TOOL" ]; then
    run freeze --untie-embeddings-and-output-weights --decoupled-lr 0 --decoupled-min-lr 0 \
        --save "$MC_TMP/fz" --save-interval 2 --train-iters 4
    "$TOOL" dump "$MC_TMP/fz/iter_0000002/mp_rank_00/model_optim_rng.pt" >"$MC_TMP/fz2.json" &&
        "$TOOL" dump "$MC_TMP/fz/iter_0000004/mp_rank_00/model_optim_rng.pt" >"$MC_TMP/fz4.json"
    check "the frozen run saves (exit 0)" test $? -eq 0
    python3 - "$MC_TMP/fz2.json" "$MC_TMP/fz4.json" >"$MC_TMP/fz.out" <<'PY'
import json, sys
def get(d, k):
    return dict((kk, v) for kk, v in d["dict"])[k]
a, b = (json.load(open(p)) for p in sys.argv[1:])
for name in ("embedding.word_embeddings.weight", "output_layer.weight",
             "embedding.position_embeddings.weight", "decoder.layers.0.mlp.linear_fc1.weight"):
    print(name, get(get(a, "model"), name)["values"] == get(get(b, "model"), name)["values"])
groups = get(get(b, "optimizer"), "param_groups")
print("groups", [(get(g, "is_decoupled_lr"), get(g, "wd_mult"), get(g, "max_lr"),
                  len(get(g, "params"))) for g in groups])
PY
    check "frozen: word embeddings and output layer unchanged from iteration 2 to 4" \
        grep -qx 'embedding.word_embeddings.weight True' "$MC_TMP/fz.out"
    check "frozen: output_layer.weight unchanged" grep -qx 'output_layer.weight True' "$MC_TMP/fz.out"
    check "frozen: position embeddings and layers still train" test \
        "$(grep -c ' False$' "$MC_TMP/fz.out")" -eq 2
    check "the optimizer's groups: decoupled (2 tensors), weight decay, none" \
        grep -qx "groups \[(True, 1, 0, 2), (False, 1, 0.003, 9), (False, 0, 0.003, 18)\]" "$MC_TMP/fz.out"
else
    skip "--decoupled-lr 0 freezes the embedding and output layer" "$TOOL is not built (make tests)"
fi

# Resuming: the checkpoint's groups continue the uninterrupted run (the line after the first
# iteration of a run averages both, so iteration 5's loss is left out).
resumed() { log_numbers "$1" | tail -n 3 | awk 'NR == 2 { $1 = "-" } 1'; }
run first "${DEC[@]}" --save "$MC_TMP/ck" --save-interval 3 --exit-interval 3 &&
    run second "${DEC[@]}" --load "$MC_TMP/ck"
check "save at 3 and --load exit 0" test $? -eq 0
check "--load gives the uninterrupted run's losses, grad norms and decoupled lr" \
    test "$(resumed "$MC_TMP/dec")" = "$(resumed "$MC_TMP/second")" -a \
    "$(column 'decoupled learning rate' "$MC_TMP/second")" = "$(column 'decoupled learning rate' "$MC_TMP/dec" | cut -d' ' -f4-)"
"$MC_BIN" "${FLAGS[@]}" --load "$MC_TMP/ck" >"$MC_TMP/out" 2>"$MC_TMP/err"
one_error_line "loading a --decoupled-lr optimizer without it: one line" \
    "saved with --decoupled-lr .* but this run has none" $? "$MC_TMP/err"
"$MC_BIN" "${FLAGS[@]}" "${DEC[@]}" --untie-embeddings-and-output-weights --load "$MC_TMP/fz" \
    --override-opt-param-scheduler \
    >"$MC_TMP/out" 2>"$MC_TMP/err"
check "loading another run's decoupled group takes its max_lr and min_lr (torch's load_state_dict)" \
    test "$(column 'decoupled learning rate' "$MC_TMP/out")" = "0.000000E+00 0.000000E+00 "

if have_mpirun; then
    for rest in "--tensor-model-parallel-size 2" "--pipeline-model-parallel-size 2"; do
        # shellcheck disable=SC2086
        mpirun_mc 2 "${FLAGS[@]}" "${DEC[@]}" $rest >"$MC_TMP/run" 2>"$MC_TMP/run.err"
        rc=$?
        if [ $rc -ne 0 ]; then
            not_ok "--decoupled-lr with $rest exits 0 (rc=$rc: $(tail -c 400 "$MC_TMP/run.err"))"
            continue
        fi
        check "--decoupled-lr with $rest gives the single-rank losses and decoupled lr" \
            same_log_numbers "$MC_TMP/dec" "$MC_TMP/run" 6
    done
    DIST=(--use-distributed-optimizer "${DEC[@]}")
    mpirun_mc 2 "${FLAGS[@]}" "${DIST[@]}" --save "$MC_TMP/dck" --save-interval 3 --exit-interval 3 \
        >"$MC_TMP/d1" 2>"$MC_TMP/d1.err" &&
        mpirun_mc 2 "${FLAGS[@]}" "${DIST[@]}" --load "$MC_TMP/dck" >"$MC_TMP/d2" 2>"$MC_TMP/d2.err"
    check "the distributed optimizer (dp 2) saves and resumes with the single rank's losses" \
        test $? -eq 0 -a "$(resumed "$MC_TMP/dec")" = "$(resumed "$MC_TMP/d2")"
    # convert-checkpoint keeps each group's fields by Megatron's identifier keys
    "$MC_BIN" convert-checkpoint --load-dir "$MC_TMP/ck" --save-dir "$MC_TMP/ck22" \
        --target-tensor-parallel-size 2 --target-pipeline-parallel-size 2 >"$MC_TMP/cv" 2>&1 &&
        mpirun_mc 4 "${FLAGS[@]}" "${DEC[@]}" --tensor-model-parallel-size 2 \
            --pipeline-model-parallel-size 2 --load "$MC_TMP/ck22" >"$MC_TMP/c2" 2>"$MC_TMP/c2.err"
    check "converted to tp 2 pp 2, the checkpoint resumes with the single rank's losses" \
        test $? -eq 0 -a "$(resumed "$MC_TMP/dec")" = "$(resumed "$MC_TMP/c2")"
else
    skip "--decoupled-lr under tp 2, pp 2 and the distributed optimizer" "mpirun is not installed"
fi
