#!/usr/bin/env bash
# --optimizer muon (optim/muon.h): a tiny model trains with it (the loss falls), dp 2 gives the
# single rank's numbers, PyTorch's Muon (test/integration/muon_ref.py, written from Megatron main's
# TensorParallelMuon and emerging_optimizers) gives the same parameters after 3 steps of a tiny
# model's optimizer, and what is not implemented is refused by name.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

FLAGS=(--device cpu --mock-data --vocab-size 256 --num-layers 2 --hidden-size 32
       --num-attention-heads 4 --group-query-attention --num-query-groups 2 --seq-length 32
       --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --train-iters 8
       --lr 3e-3 --weight-decay 0.1 --clip-grad 1.0 --log-interval 1 --eval-iters 0 --seed 1234
       --tokenizer-type NullTokenizer --optimizer muon --muon-nesterov)
first_last() { sed -nE 's/.*\| lm loss: ([0-9.E+-]+) \|.*/\1/p' "$1" | sed -n '1p;$p' | tr '\n' ' '; }

"$MC_BIN" "${FLAGS[@]}" >"$MC_TMP/one" 2>"$MC_TMP/one.err"
check "--optimizer muon trains 8 iterations (exit 0)" test $? -eq 0
check "the loss falls by more than 0.1 (first and last: $(first_last "$MC_TMP/one"))" \
    awk -v l="$(first_last "$MC_TMP/one")" 'BEGIN { split(l, v, " "); exit !(v[2] < v[1] - 0.1) }'
"$MC_BIN" "${FLAGS[@]/muon/adam}" >"$MC_TMP/adam" 2>&1
check "Muon's losses are not Adam's" test "$(log_numbers "$MC_TMP/one")" != "$(log_numbers "$MC_TMP/adam")"
# dp 2 against one rank with fp32 Newton-Schulz GEMMs: at the default medium precision the bf16
# iterate rounds across a boundary now and then when the gradient sums run in another order (as
# in Megatron), which moves the losses by about 1e-5
FLAGS+=(--muon-fp32-matmul-prec high)
"$MC_BIN" "${FLAGS[@]}" >"$MC_TMP/high" 2>&1
if have_mpirun; then
    LAYOUT_MIN_ITERS=8 layout_equals "muon at dp 2" "$MC_TMP/high" 2
else
    skip "muon at dp 2" "mpirun is not installed"
fi

# PyTorch's Muon on the same 3 steps: fp32 Newton-Schulz GEMMs to 1e-5; medium precision's bf16
# GEMMs within 2e-3 (a bf16 rounding of the iterate can fall the other way when the fp32 sums run
# in another order, here OpenBLAS's and PyTorch's; a wrong step moves them by 1e-2)
TOOL=${MC_BUILD:-build/rel}/test/tools/muon_steps
REF=$(dirname "$0")/muon_ref.py
cases=("0 high quintic spectral 1 1e-5" "1 high polar_express unit_rms_norm 0 1e-5"
       "1 medium quintic shape_scaling 1 2e-3")
if [ ! -x /usr/bin/python3 ]; then
    skip "PyTorch's Muon" "/usr/bin/python3 is not installed"
else
    refargs=()
    for k in "${!cases[@]}"; do
        set -- ${cases[$k]}
        "$TOOL" 3 "$1" "$2" "$3" "$4" "$5" >"$MC_TMP/steps$k"
        refargs+=("$MC_TMP/steps$k" "$@")
    done
    /usr/bin/python3 "$REF" "${refargs[@]}" >"$MC_TMP/ref" 2>"$MC_TMP/ref.err"
    rc=$?
    if grep -q '^SKIP' "$MC_TMP/ref"; then
        skip "PyTorch's Muon" "$(sed -n 's/^SKIP //p' "$MC_TMP/ref")"
    else
        check "PyTorch's Muon gives megatron-c's parameters after 3 steps ($(paste -sd';' "$MC_TMP/ref"))" \
            test $rc -eq 0 -a "$(grep -c ': ok largest' "$MC_TMP/ref")" -eq ${#cases[@]}
    fi
fi

expect_user_error "dist_muon is refused by name" "dist_muon.*not implemented yet" \
    "${FLAGS[@]}" --optimizer dist_muon
expect_user_error "muon with the distributed optimizer is refused by name" \
    "--optimizer muon with --use-distributed-optimizer.*not implemented yet" \
    "${FLAGS[@]}" --use-distributed-optimizer
expect_user_error "muon with --save is refused by name" "--optimizer muon with --save or --load" \
    "${FLAGS[@]}" --save "$MC_TMP/ck" --save-interval 4
expect_user_error "an unknown coefficient type is refused" "--muon-coefficient-type custom" \
    "${FLAGS[@]}" --muon-coefficient-type custom
expect_user_error "muon with fp16 is refused as Megatron does" "--optimizer muon does not support --fp16" \
    "${FLAGS[@]}" --fp16
expect_user_error "--muon-scalar-optimizer lion is refused by name" "lion|Lion" \
    "${FLAGS[@]}" --muon-scalar-optimizer lion
# at a world size of 2 without starting ranks (recipe_check: megatron-c's parse and validation)
CHECK=${MC_BUILD:-build/rel}/test/tools/recipe_check
"$CHECK" 2 "${FLAGS[@]}" --tensor-model-parallel-size 2 >/dev/null 2>"$MC_TMP/tp.err"
one_error_line "muon at tp 2 is refused by name" "--optimizer muon with tensor parallelism.*not implemented yet" $? "$MC_TMP/tp.err"
expect_user_error "muon with --use-mup is refused by name" "--optimizer muon with --use-mup" \
    "${FLAGS[@]}" --use-mup
expect_user_error "--muon-num-ns-steps 0 is refused as Megatron does" \
    "--muon-num-ns-steps must be at least 1" "${FLAGS[@]}" --muon-num-ns-steps 0
