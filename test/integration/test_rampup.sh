#!/usr/bin/env bash
# --rampup-batch-size, as Megatron's RampupBatchsizeNumMicroBatchesCalculator: the
# global batch of each iteration from the consumed samples, the log's batch sizes and consumed
# samples, the calculator's log lines, the same losses under dp 2, pp 2 and interleaving, a
# checkpoint saved mid-ramp resuming with the uninterrupted run's losses, and the errors.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

# 2 2 24 to 8: increments of 24 / 3 = 8 samples. Consumed 0 2 4 6 (batch 2), 8 12 (4), 16 22 (6),
# then 28 > 24: 8. update_train_iters: 8 ramp iterations to 28, (64 - 28) // 8 = 4 more.
FLAGS=(--device cpu --mock-data --vocab-size 128 --num-layers 4 --hidden-size 32
       --num-attention-heads 4 --seq-length 16 --max-position-embeddings 16 --micro-batch-size 1
       --global-batch-size 8 --rampup-batch-size 2 2 24 --train-samples 64 --lr 3e-3
       --lr-decay-style cosine --lr-warmup-samples 8 --min-lr 1e-4 --weight-decay 0.1
       --clip-grad 1.0 --log-interval 1 --eval-iters 0 --seed 1234 --hidden-dropout 0.1
       --attention-dropout 0.1)

"$MC_BIN" "${FLAGS[@]}" >"$MC_TMP/single" 2>"$MC_TMP/single.err"
check "a ramp-up run exits 0" test $? -eq 0
field() { sed -nE "s/.*\| $1: +([0-9]+) \|.*/\1/p" "$2" | tr '\n' ' '; }
check "update_train_iters: 12 iterations" grep -q 'iteration       12/      12 |' "$MC_TMP/single"
check "the log's global batch sizes follow the ramp" \
    test "$(field 'global batch size' "$MC_TMP/single")" = "2 2 2 2 4 4 6 6 8 8 8 8 "
check "consumed samples advance by the current batch" \
    test "$(field 'consumed samples' "$MC_TMP/single")" = "2 4 6 8 12 16 22 28 36 44 52 60 "
CALC=INFO:megatron.core.num_microbatches_calculator:
check "the calculator's start-up lines" grep -qx "${CALC}will use batch size rampup starting from global batch size 2 to global batch size 8 with batchsize increments 2 over 24 samples." "$MC_TMP/single"
check "each ramp-up step is logged once, before its iteration" test \
    "$(grep -E "^${CALC}|iteration +[0-9]+/" "$MC_TMP/single" | sed -nE "s/^${CALC}(.*)/\1/p; s/.*iteration +([0-9]+)\/.*/\1/p" | tr '\n' ,)" = \
    "will use batch size rampup starting from global batch size 2 to global batch size 8 with batchsize increments 2 over 24 samples.,setting initial batch size to 2,1,2,3,4,ramping up batch size from 2 to 4,5,6,ramping up batch size from 4 to 6,7,8,ramping up batch size from 6 to 8,9,10,11,12,"

if have_mpirun; then
    for rest in "" "--pipeline-model-parallel-size 2" \
        "--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2"; do
        name="${rest:-dp=2}"
        # shellcheck disable=SC2086
        mpirun_mc 2 "${FLAGS[@]}" $rest >"$MC_TMP/run" 2>"$MC_TMP/run.err"
        rc=$?
        if [ $rc -ne 0 ]; then
            not_ok "ramp-up with $name exits 0 (rc=$rc: $(tail -c 400 "$MC_TMP/run.err"))"
            continue
        fi
        check "ramp-up with $name gives the single-rank losses and grad norms" \
            same_log_numbers "$MC_TMP/single" "$MC_TMP/run" 12
    done
else
    skip "ramp-up under dp 2 and pp 2" "mpirun is not installed"
fi

# Megatron's train() saves before the first iteration with more microbatches (after iteration 4
# the consumed 8 make the batch 4); --exit-interval 5 saves mid-ramp (consumed 12), and --load
# goes on from there with batch 4, giving the uninterrupted run's iterations 6..12.
"$MC_BIN" "${FLAGS[@]}" --save "$MC_TMP/ck" --save-interval 100 --exit-interval 5 \
    >"$MC_TMP/first" 2>"$MC_TMP/first.err"
check "the first half saves at the ramp-up step and the exit (exit 0)" \
    test $? -eq 0 -a -d "$MC_TMP/ck/iter_0000004" -a -d "$MC_TMP/ck/iter_0000005"
"$MC_BIN" "${FLAGS[@]}" --load "$MC_TMP/ck" >"$MC_TMP/second" 2>"$MC_TMP/second.err"
check "--load mid-ramp exits 0" test $? -eq 0
check "--load logs the ramp-up to the checkpoint's batch" \
    grep -qx "${CALC}ramping up batch size from 2 to 4" "$MC_TMP/second"
# The line after the first iteration of a run averages both (Megatron main's training_log does
# not reset the interval at the first iteration): iteration 7's loss is left out.
resumed() { log_numbers "$1" | tail -n 7 | awk 'NR == 2 { $1 = "-" } 1'; }
check "--load mid-ramp gives the uninterrupted run's losses and grad norms (iterations 6..12)" \
    test "$(resumed "$MC_TMP/single")" = "$(resumed "$MC_TMP/second")" -a \
    "$(field 'global batch size' "$MC_TMP/second")" = "4 6 6 8 8 8 8 "

NOFLAGS=("${FLAGS[@]/--train-samples/--train-iters}")
NOFLAGS=("${NOFLAGS[@]/--lr-warmup-samples/--lr-warmup-iters}")
expect_user_error "--rampup-batch-size with --train-iters" \
    "expected no batch-size rampup for iteration-based training" "${NOFLAGS[@]}"
expect_user_error "a start above the global batch size" \
    "expected global batch size to be greater than or equal to start batch size, got 8 and 10" \
    "${FLAGS[@]}" --rampup-batch-size 10 2 24
expect_user_error "an increment that does not divide the ramp" \
    "expected global batch size interval \(5\) to be divisible by global batch size increment \(2\)" \
    "${FLAGS[@]}" --rampup-batch-size 3 2 24
expect_user_error "a ramp batch that is no whole number of microbatches" \
    "current global batch size \(3\) is not divisible by micro-batch-size \(2\) times data parallel size \(1\)" \
    "${FLAGS[@]}" --micro-batch-size 2 --rampup-batch-size 2 1 24
# the interleaved schedule's refusal of a ramp batch: test_cli.c (it needs pp ranks)

# inspect-data --iteration: the samples of that iteration's (ramp) batch
"$MC_BIN" inspect-data "${FLAGS[@]}" --split-name train --iteration 4 >"$MC_TMP/insp" 2>&1
check "inspect-data --iteration 4 lists the ramp's batch of 4 from sample 8" \
    test "$(tail -n +2 "$MC_TMP/insp" | cut -f2 | tr '\n' ' ')" = "8 9 10 11 "
