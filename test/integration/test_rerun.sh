#!/usr/bin/env bash
# Megatron's rerun state machine end to end (train/rerun.h; its transitions: test_rerun.c), with
# --error-injection-rate 1 (every validation after the first iteration is hit, as in Megatron):
#  - a transient error in a check that is not fatal (--check-for-spiky-loss) is re-run in place and
#    training goes on with the numbers of a run without injection;
#  - a transient error in the fatal NaN check ends the job with exit 17 before the optimizer step;
#  - a persistent one saves a checkpoint at the last iteration and exits 16; resumed from it, the
#    job trains on with the numbers of the run without injection;
#  - report_stats runs every step twice and reports identical results, same numbers.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

FLAGS=(--device cpu --mock-data --vocab-size 256 --num-layers 2 --hidden-size 32
       --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32 --micro-batch-size 2
       --global-batch-size 4 --train-iters 4 --lr 1e-3 --log-interval 1 --eval-iters 0 --seed 7)
VR=(--rerun-mode validate_results --error-injection-rate 1)

# the log lines' numbers: everything from the learning rate on, without times and throughput
numbers() { grep -E '^ *\[?.*iteration +[0-9]+/' "$1" | sed -E 's/.*(iteration +[0-9]+\/)/\1/; s/elapsed time[^|]*\|//; s/throughput[^|]*\|//'; }

run() { # NAME ARGS...: stdout to $MC_TMP/NAME.out, stderr to .err; sets rc
    local name=$1
    shift
    "$MC_BIN" "${FLAGS[@]}" "$@" >"$MC_TMP/$name.out" 2>"$MC_TMP/$name.err"
    rc=$?
}
last_iteration() { numbers "$1" | tail -n 1 | grep -oE '^iteration +[0-9]+' | tr -dc 0-9; }

run base
check "the run without the machine trains 4 iterations (rc=$rc)" \
    bash -c "[ $rc -eq 0 ] && [ \"\$(grep -c 'iteration .*/ *4 ' '$MC_TMP/base.out')\" -eq 4 ]"
numbers "$MC_TMP/base.out" >"$MC_TMP/base.num"

# transient, not fatal: re-run, same numbers, three times (iterations 2-4; the first is never
# validated). Megatron main's messages number the iterations one past its log line (train() sets
# the machine's 0-based iteration to the loaded count, then should_run_forward_backward adds one):
# the log's iteration 2 is the messages' #3.
run transient "${VR[@]}" --no-check-for-nan-in-loss-and-grad --check-for-spiky-loss
numbers "$MC_TMP/transient.out" >"$MC_TMP/transient.num"
E="$MC_TMP/transient.err"
check "transient error in the spiky-loss check: re-run, training goes on to the end (rc=$rc)" \
    bash -c "[ $rc -eq 0 ] && [ \"\$(grep -c '^Injecting error type Transient error$' '$E')\" -eq 3 ] &&
             [ \"\$(grep -c '^Need to rerun step to check reproducibility of initial result$' '$E')\" -eq 3 ] &&
             grep -q \"^Unexpected result tensor([0-9.]*) on rank 0 at iteration #3 invocation #1 (message='Spiky loss')\$\" '$E' &&
             grep -q '^Rank 0, node .*, device 0, iteration #3: Possible transient error!!\$' '$E' &&
             [ \"\$(grep -c '^Continuing normal execution because failed validation was not fatal$' '$E')\" -eq 3 ]"
check "the re-run steps give the numbers of the run without injection" \
    diff "$MC_TMP/base.num" "$MC_TMP/transient.num"

# transient in the fatal NaN check (the default): exit 17 at the second iteration, not applied
run fatal "${VR[@]}"
check "transient error in the NaN check: exit 17 after the re-run, iteration 1 the last (rc=$rc)" \
    bash -c "[ $rc -eq 17 ] &&
             grep -q '^Exiting now. The job can be resumed from a previous checkpoint$' '$MC_TMP/fatal.err' &&
             grep -q \"message='found NaN in local forward loss calculation'\" '$MC_TMP/fatal.err' &&
             ! grep -q '^megatron-c:' '$MC_TMP/fatal.err'"
check "exit 17: the last iteration logged is 1" test "$(last_iteration "$MC_TMP/fatal.out")" = 1

# persistent in the NaN check: a checkpoint at iteration 1, exit 16; resumed, the numbers go on
run persistent "${VR[@]}" --error-injection-type persistent_error --save "$MC_TMP/ck" \
    --save-interval 100
check "persistent error: checkpoint at iteration 1 and exit 16 (rc=$rc)" \
    bash -c "[ $rc -eq 16 ] && [ \"\$(cat '$MC_TMP/ck/latest_checkpointed_iteration.txt')\" = 1 ] &&
             grep -q '^Rank 0, node .*, iteration #3: First rerun: unexpected result is reproducible within the tolerance (tensor(.*) = tensor(.*)). Need to rerun on a different GPU to verify correctness.!$' '$MC_TMP/persistent.err' &&
             grep -q '^Saving a checkpoint and exiting now. Please resume the job from the checkpoint to rerun the last iteration and establish a diagnostic$' '$MC_TMP/persistent.err'"
check "exit 16: the last iteration logged is 1" test "$(last_iteration "$MC_TMP/persistent.out")" = 1
run resumed --load "$MC_TMP/ck"
numbers "$MC_TMP/resumed.out" >"$MC_TMP/resumed.num"
# (the lm loss of the first two lines differs by the log's first-iteration rule: the first line
# of a job does not reset the interval's totals, so base's line 2 averages iterations 1-2 and the
# resumed job's line 3 averages 2-3; the grad norms and the last line are the step's own numbers)
check "resumed from that checkpoint, iterations 2-4 have the numbers of the run without injection (rc=$rc)" \
    bash -c "[ $rc -eq 0 ] && diff <(tail -n 3 '$MC_TMP/base.num' | sed -E 's/lm loss: [0-9.E+-]+//') \
             <(sed -E 's/lm loss: [0-9.E+-]+//' '$MC_TMP/resumed.num') &&
             diff <(tail -n 1 '$MC_TMP/base.num') <(tail -n 1 '$MC_TMP/resumed.num')"

# report_stats: every step twice, identical results reported every other iteration
run stats --rerun-mode report_stats
numbers "$MC_TMP/stats.out" >"$MC_TMP/stats.num"
check "report_stats: the same numbers (rc=$rc)" diff "$MC_TMP/base.num" "$MC_TMP/stats.num"
check "report_stats: Megatron's report at iterations 2 and 4, all identical" \
    bash -c "[ \"\$(grep -c '^Stats on computation determinism in validation calls$' '$MC_TMP/stats.err')\" -eq 2 ] &&
             grep -q \"^  From validation call 'found NaN in local forward loss calculation':$\" '$MC_TMP/stats.err' &&
             grep -q '^    4 samples, all identical$' '$MC_TMP/stats.err'"

# pp 2: only the last stage validates the loss, so only it injects; the first stage re-runs with
# it (the machine's decisions are reduced over the world) and the numbers are the single rank's
if have_mpirun; then
    "${MPIRUN[@]}" -np 2 "$MC_BIN" "${FLAGS[@]}" --pipeline-model-parallel-size 2 "${VR[@]}" \
        --no-check-for-nan-in-loss-and-grad --check-for-spiky-loss >"$MC_TMP/pp.out" 2>"$MC_TMP/pp.err"
    rc=$?
    numbers "$MC_TMP/pp.out" >"$MC_TMP/pp.num"
    check "pp 2: the last stage's injected error re-runs both stages, single-rank numbers (rc=$rc)" \
        bash -c "[ $rc -eq 0 ] && [ \"\$(grep -c '^Injecting error type' '$MC_TMP/pp.err')\" -eq 3 ] &&
                 [ \"\$(grep -c 'on rank 1 at iteration' '$MC_TMP/pp.err')\" -eq 3 ] &&
                 [ \"\$(grep -c '^Continuing normal execution' '$MC_TMP/pp.err')\" -eq 3 ]"
    check "pp 2: the numbers of the run without injection" \
        same_lines_float32_loss "$MC_TMP/base.num" "$MC_TMP/pp.num"
else
    skip "the rerun state machine over several ranks" "mpirun is not installed"
fi

# bad input: one line naming the flag, exit 2
expect_user_error "--error-injection-rate without validate_results is refused" \
    "--error-injection-rate injects errors only with --rerun-mode validate_results" \
    "${FLAGS[@]}" --error-injection-rate 5
expect_user_error "a negative --error-injection-rate is refused" "--error-injection-rate" \
    "${FLAGS[@]}" --rerun-mode validate_results --error-injection-rate -1
expect_user_error "an unknown --error-injection-type is refused" "--error-injection-type" \
    "${FLAGS[@]}" --rerun-mode validate_results --error-injection-type cosmic_ray
exit 0
