#!/usr/bin/env bash
# --tensorboard-dir: event files read back by TensorBoard's own reader (the tensorboard package in
# build/venv-tb, made by scripts/install-deps.sh) and compared with the run's log lines: Megatron's
# tags and x-axes, every --log-*-to-tensorboard switch, --tensorboard-log-interval,
# --tensorboard-queue-size, validation, the last rank as the writer, a SIGKILL'd run.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${MC_TB_PYTHON:-$ROOT/build/venv-tb/bin/python}
CHECK=$ROOT/test/integration/tensorboard_check.py

if ! "$PY" -c 'import tensorboard' 2>/dev/null; then
    skip "TensorBoard reads megatron-c's event files" \
        "no tensorboard package at $PY (run scripts/install-deps.sh, which makes build/venv-tb)"
    exit 0
fi
export TF_CPP_MIN_LOG_LEVEL=3 # the reader's "TensorFlow not found" notices

FLAGS=(--device cpu --mock-data --num-layers 2 --hidden-size 32 --num-attention-heads 4
       --seq-length 32 --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4
       --lr 1e-3 --lr-warmup-iters 2 --lr-decay-style cosine --min-lr 1e-4 --vocab-size 128
       --seed 7 --eval-iters 1)
# tags with their "vs samples" twins
vs() { local t out=""; for t in "$@"; do out+="$t,$t vs samples,"; done; echo "${out%,}"; }
DEFAULT_TAGS=$(vs learning-rate batch-size "lm loss" loss-scale grad-norm)
VALID_TAGS=$(vs "lm loss validation")

# checker CASE DIR LOG ARGS...: the TAP lines of tensorboard_check.py (a crash is one not ok)
checker() {
    "$PY" "$CHECK" "$@" 2>"$MC_TMP/check.err" || grep -q '^not ok' "$MC_TMP/check.out" ||
        echo "not ok - $1: tensorboard_check.py failed: $(tail -c 400 "$MC_TMP/check.err")"
}
run_checked() { # CASE DIR LOG CHECK-ARGS... (the run's output is in LOG already)
    checker "$@" >"$MC_TMP/check.out"
    cat "$MC_TMP/check.out"
}

# 1. Every switch on, logged each iteration: every tag against the log lines.
D=$MC_TMP/all
"$MC_BIN" "${FLAGS[@]}" --train-iters 8 --log-interval 1 --eval-interval 4 --tensorboard-dir "$D" \
    --log-timers-to-tensorboard --timing-log-level 2 --log-throughput --log-params-norm \
    --log-num-zeros-in-grad --log-validation-ppl-to-tensorboard --log-world-size-to-tensorboard \
    --log-memory-to-tensorboard >"$MC_TMP/all.log" 2>"$MC_TMP/all.err"
check "every switch: the run exits 0" test $? -eq 0
check "every switch: '> setting tensorboard ...' as Megatron" grep -qx '> setting tensorboard ...' "$MC_TMP/all.log"
TIMERS=$(sed -nE 's/^    ([a-z-]+) \.+: \(.*/\1-time/p' "$MC_TMP/all.log" | sort -u | paste -sd,)
ALL_TAGS="$DEFAULT_TAGS,$(vs world-size num-zeros params-norm),mem-reserved-bytes,mem-allocated-bytes"
ALL_TAGS+=",mem-max-allocated-bytes,mem-allocated-count,iteration-time,throughput,$TIMERS"
ALL_TAGS+=",$VALID_TAGS,$(vs "lm loss validation ppl")"
run_checked "every switch" "$D" "$MC_TMP/all.log" --expect-tags "$ALL_TAGS" --args

# 2. Defaults with --no-log-loss-scale-to-tensorboard, fp16 (skipped iterations: no grad-norm),
# timers logged but not written, --tensorboard-log-interval 3, validation without PPL.
D=$MC_TMP/interval
"$MC_BIN" "${FLAGS[@]}" --train-iters 10 --log-interval 1 --eval-interval 5 --fp16 \
    --initial-loss-scale 1e6 --tensorboard-dir "$D" --tensorboard-log-interval 3 \
    --no-log-loss-scale-to-tensorboard --timing-log-level 1 >"$MC_TMP/interval.log" 2>&1
check "--tensorboard-log-interval 3: the run exits 0" test $? -eq 0
check "fp16 run skipped iteration 3 (for the grad-norm check)" grep -qE 'iteration +3/.*number of skipped iterations: +1 ' "$MC_TMP/interval.log"
run_checked "interval 3, no loss scale" "$D" "$MC_TMP/interval.log" --tb-interval 3 \
    --expect-tags "$(vs learning-rate batch-size "lm loss" grad-norm),$VALID_TAGS"

# 2b. A batch-size ramp and --decoupled-lr: 'batch-size' is each iteration's batch (2, 4, 6, then
# 8), 'decoupled-learning-rate' the decoupled group's, against the iteration only (as Megatron).
D=$MC_TMP/ramp
"$MC_BIN" --device cpu --mock-data --num-layers 2 --hidden-size 32 --num-attention-heads 4 \
    --seq-length 32 --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 \
    --lr 1e-3 --lr-decay-style cosine --min-lr 1e-4 --vocab-size 128 --seed 7 --eval-iters 0 \
    --train-samples 64 --rampup-batch-size 2 2 16 --decoupled-lr 5e-3 --log-interval 1 \
    --tensorboard-dir "$D" >"$MC_TMP/ramp.log" 2>&1
check "ramp-up and --decoupled-lr: the run exits 0" test $? -eq 0
check "ramp-up: the log's batch sizes ramp 2, 4, 6, 8" \
    test "$(grep -oE 'global batch size: +[0-9]+' "$MC_TMP/ramp.log" | awk '{print $4}' | uniq | paste -sd,)" = "2,4,6,8"
run_checked "ramp-up, decoupled lr" "$D" "$MC_TMP/ramp.log" \
    --expect-tags "$(vs learning-rate batch-size "lm loss" loss-scale grad-norm),decoupled-learning-rate"

# 2c. --log-interval 4: each line re-made by Megatron's format strings from the float32 values of
# the events (check_exact): main's first line at iteration 1, then windows of 4 (the first holding
# iteration 1 again) averaged from training_log's float32 total; iteration 4's learning rate
# prints 9.140577E-04 from float32, 9.140576E-04 from the double.
D=$MC_TMP/digits
"$MC_BIN" "${FLAGS[@]}" --train-iters 12 --log-interval 4 --eval-interval 6 --log-num-zeros-in-grad \
    --tensorboard-dir "$D" >"$MC_TMP/digits.log" 2>&1
check "--log-interval 4: the run exits 0" test $? -eq 0
check "--log-interval 4: lines at iterations 1, 4, 8, 12" \
    test "$(grep -oE 'iteration +[0-9]+/' "$MC_TMP/digits.log" | tr -dc '0-9\n' | paste -sd,)" = "1,4,8,12"
run_checked "log interval 4, to the digit" "$D" "$MC_TMP/digits.log" \
    --expect-tags "$DEFAULT_TAGS,$(vs num-zeros),$VALID_TAGS"

# 3. --skip-train: the end-of-run evaluations write nothing (write_to_tensorboard=not skip_train).
D=$MC_TMP/skip
"$MC_BIN" "${FLAGS[@]}" --train-iters 4 --skip-train --tensorboard-dir "$D" >"$MC_TMP/skip.log" 2>&1
check "--skip-train: the run exits 0" test $? -eq 0
no_scalars() { # DIR: a readable file holding the arguments' texts and no scalar
    "$PY" -c 'import sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
ea = EventAccumulator(sys.argv[1])
ea.Reload()
sys.exit(not (ea.Tags()["tensors"] and not ea.Tags()["scalars"]))' "$1" 2>/dev/null
}
check "--skip-train: the arguments' texts and no scalar" no_scalars "$D"

# 4. Two ranks, pipeline-parallel: the last rank (world_size - 1) writes, with its log's values.
if have_mpirun; then
    D=$MC_TMP/mpi
    # the wrapper records each rank's pid and becomes megatron-c (exec keeps the pid)
    cat >"$MC_TMP/rank.sh" <<EOF
#!/bin/sh
echo "\$OMPI_COMM_WORLD_RANK \$\$" >>"$MC_TMP/pids"
exec "$MC_BIN" "\$@"
EOF
    chmod +x "$MC_TMP/rank.sh"
    "${MPIRUN[@]}" -np 2 "$MC_TMP/rank.sh" "${FLAGS[@]}" --train-iters 6 --log-interval 1 \
        --eval-interval 3 --pipeline-model-parallel-size 2 --tensorboard-dir "$D" \
        --log-world-size-to-tensorboard --log-params-norm --log-timers-to-tensorboard \
        --timing-log-level 1 >"$MC_TMP/mpi.log" 2>"$MC_TMP/mpi.err"
    check "mpirun -np 2: the run exits 0" test $? -eq 0
    TIMERS=$(sed -nE 's/^    ([a-z-]+) \.+: \(.*/\1-time/p' "$MC_TMP/mpi.log" | sort -u | paste -sd,)
    TB_WORLD=2 run_checked "mpirun -np 2 pp=2" "$D" "$MC_TMP/mpi.log" --pid "$(awk '$1 == 1 {print $2}' "$MC_TMP/pids")" \
        --expect-tags "$DEFAULT_TAGS,$(vs world-size params-norm),iteration-time,$TIMERS,$VALID_TAGS"
else
    skip "mpirun -np 2: the last rank writes" "mpirun is not installed"
fi

# 5. SIGKILL: the file holds whole records up to the last log line.
# wait_for FILE PATTERN SECONDS
wait_for() { for _ in $(seq "$(($3 * 10))"); do grep -qE "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }
D=$MC_TMP/killed
"$MC_BIN" "${FLAGS[@]}" --train-iters 100000 --log-interval 5 --eval-iters 0 --tensorboard-dir "$D" \
    >"$MC_TMP/killed.log" 2>&1 &
pid=$!
wait_for "$MC_TMP/killed.log" 'iteration +20/' 60
kill -KILL "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
check "SIGKILL: the run was killed while training" grep -qE 'iteration +20/' "$MC_TMP/killed.log"
run_checked "SIGKILL" "$D" "$MC_TMP/killed.log" --killed --expect-tags "$DEFAULT_TAGS"

# 6. --tensorboard-queue-size 4 without log lines after the first: events reach the file 4 at a
# time (10 scalars per iteration with the defaults, flushed with the iteration-1 line).
D=$MC_TMP/queue
"$MC_BIN" "${FLAGS[@]}" --train-iters 100000 --log-interval 100000 --eval-iters 0 \
    --tensorboard-dir "$D" --tensorboard-queue-size 4 >"$MC_TMP/queue.log" 2>&1 &
pid=$!
wait_for "$MC_TMP/queue.log" 'iteration +1/' 60
sleep 1
kill -KILL "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
run_checked "--tensorboard-queue-size 4" "$D" "$MC_TMP/queue.log" --queue 4 --per-iteration 10

# 7. A directory that cannot be made: one error line, exit 2.
"$MC_BIN" "${FLAGS[@]}" --train-iters 4 --tensorboard-dir /dev/null/tb >/dev/null 2>"$MC_TMP/bad.err"
rc=$?
check "--tensorboard-dir that cannot be created exits 2 ($rc)" test $rc -eq 2
one_error_line "--tensorboard-dir that cannot be created: one error line" \
    '^megatron-c: error: --tensorboard-dir: /dev/null: ' $rc "$MC_TMP/bad.err"
