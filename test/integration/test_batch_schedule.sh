#!/usr/bin/env bash
# --step-batch-size-schedule, as Megatron main's StepBatchsizeNumMicroBatchesCalculator: the
# global batch of each iteration from the consumed samples (thresholds in tokens), the log's
# batch sizes and consumed samples, update_train_iters' count, a checkpoint saved mid-schedule
# resuming with the uninterrupted run's lines, and the errors naming the flag. The schedule's
# arithmetic against Megatron's class is test/unit/config/test_batch_schedule.c.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

# seq 32: 0:2 128:4 384:8 tokens are 0:2 4:4 12:8 samples. Consumed 0 2 (batch 2), 4 8 (4),
# 12 20 (8), then 28 = --train-samples: 6 iterations (update_train_iters counts while < 28).
FLAGS=(--device cpu --mock-data --vocab-size 256 --num-layers 2 --hidden-size 32
       --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32 --micro-batch-size 1
       --step-batch-size-schedule "0:2 128:4 384:8" --train-samples 28 --lr 3e-3
       --lr-decay-style cosine --lr-warmup-samples 4 --min-lr 1e-4 --log-interval 1
       --eval-iters 0 --seed 1234)

"$MC_BIN" "${FLAGS[@]}" >"$MC_TMP/single" 2>"$MC_TMP/single.err"
check "a step-schedule run exits 0" test $? -eq 0
field() { sed -nE "s/.*\| $1: +([0-9]+) \|.*/\1/p" "$2" | tr '\n' ' '; }
check "update_train_iters: 6 iterations" grep -q 'iteration        6/       6 |' "$MC_TMP/single"
check "the log's global batch sizes follow the schedule" \
    test "$(field 'global batch size' "$MC_TMP/single")" = "2 2 4 4 8 8 "
check "consumed samples advance by the current batch" \
    test "$(field 'consumed samples' "$MC_TMP/single")" = "2 4 8 12 20 28 "
CALC=INFO:megatron.core.num_microbatches_calculator:
check "set_global_variables' line and the calculator's table" \
    grep -qx "> using step batch size schedule: 0:2 128:4 384:8" "$MC_TMP/single" -a \
    "$(grep -c "^${CALC}  >= .* -> batch_size=" "$MC_TMP/single")" = 3
check "the table's last entry in Megatron's words" grep -qxF \
    "${CALC}  >= 384 tokens (12 samples) -> batch_size=8, num_microbatches=8" "$MC_TMP/single"

if have_mpirun; then
    mpirun_mc 2 "${FLAGS[@]}" --pipeline-model-parallel-size 2 >"$MC_TMP/pp" 2>"$MC_TMP/pp.err"
    check "the schedule under pp 2 gives the single-rank losses and grad norms" \
        same_log_numbers "$MC_TMP/single" "$MC_TMP/pp" 6
else
    skip "the schedule under pp 2" "mpirun is not installed"
fi

# Megatron's train() saves before the first iteration with more microbatches (iteration 2:
# consumed 4 makes the batch 4); --exit-interval 3 saves mid-schedule (consumed 8), and --load
# goes on from the checkpoint's consumed samples, giving the uninterrupted run's iterations 4..6.
"$MC_BIN" "${FLAGS[@]}" --save "$MC_TMP/ck" --save-interval 100 --exit-interval 3 \
    >"$MC_TMP/first" 2>"$MC_TMP/first.err"
check "the first part saves at the schedule's step and the exit (exit 0)" \
    test $? -eq 0 -a -d "$MC_TMP/ck/iter_0000002" -a -d "$MC_TMP/ck/iter_0000003"
"$MC_BIN" "${FLAGS[@]}" --load "$MC_TMP/ck" >"$MC_TMP/second" 2>"$MC_TMP/second.err"
check "--load mid-schedule exits 0" test $? -eq 0
# Whole lines less the clock: the line after the first iteration of a run averages both
# (training_log does not reset the interval at the first iteration), so iteration 5's loss is
# left out.
resumed() {
    grep -E '^ \[.*\] iteration ' "$1" | tail -n 3 |
        sed -E 's/^ \[[^]]*\]//; s/elapsed time per iteration \(ms\): [0-9.]+ \|//' |
        awk 'NR == 2 { sub(/lm loss: [^|]*/, "lm loss: -") } 1'
}
check "--load mid-schedule gives the uninterrupted run's lines (iterations 4..6)" \
    test "$(resumed "$MC_TMP/single")" = "$(resumed "$MC_TMP/second")" -a \
    "$(field 'global batch size' "$MC_TMP/second")" = "4 8 8 " -a \
    "$(field 'consumed samples' "$MC_TMP/second")" = "12 20 28 "

S=--step-batch-size-schedule
# Megatron's flag is type=str without nargs (TrainingConfig.step_batch_size_schedule: str): the
# schedule is one word, quoted; unquoted, argparse stops at the second entry
expect_user_error "a schedule written as several words" "unrecognized argument '128:4'" \
    "${FLAGS[@]}" $S 0:2 128:4
expect_user_error "a schedule entry without a colon" "^megatron-c: error: $S: invalid schedule entry \"x\"" \
    "${FLAGS[@]}" $S "0:2 x"
expect_user_error "a first threshold that is not 0" "$S: the first schedule entry must have threshold 0, got 1 samples" \
    "${FLAGS[@]}" $S "32:2 128:4"
expect_user_error "thresholds equal in samples" "$S: schedule thresholds must be strictly increasing, got 4 before 4" \
    "${FLAGS[@]}" $S "0:2 128:4 130:8"
expect_user_error "with --global-batch-size" "cannot specify both --step-batch-size-schedule and --global-batch-size" \
    "${FLAGS[@]}" --global-batch-size 8
expect_user_error "a batch that is no whole number of microbatches" \
    "current global batch size \(3\) is not divisible by micro_batch_size \(2\) \* data_parallel_size \(1\)" \
    "${FLAGS[@]}" --micro-batch-size 2 $S "0:2 128:3"
expect_user_error "a batch size that decreases" "$S: the number of microbatches should not decrease; going from 4 to 2" \
    "${FLAGS[@]}" $S "0:2 128:4 384:2"
"$MC_BIN" "${FLAGS[@]}" --rampup-batch-size 1 1 8 --exit-interval 1 >"$MC_TMP/ramp" 2>"$MC_TMP/ramp.err"
check "--rampup-batch-size with a schedule: ignored as Megatron main does, saying so once" \
    test $? -eq 0 -a "$(grep -c 'rampup-batch-size is ignored with --step-batch-size-schedule' "$MC_TMP/ramp.err")" = 1 -a \
    "$(field 'global batch size' "$MC_TMP/ramp")" = "2 "

# inspect-data --iteration: the samples of that iteration's batch (consumed 12 before
# iteration 4, the schedule's batch 8)
"$MC_BIN" inspect-data "${FLAGS[@]}" --split-name train --iteration 4 >"$MC_TMP/insp" 2>&1
check "inspect-data --iteration 4 lists the schedule's batch of 8 from sample 12" \
    test "$(tail -n +2 "$MC_TMP/insp" | cut -f2 | tr '\n' ' ')" = "12 13 14 15 16 17 18 19 "
