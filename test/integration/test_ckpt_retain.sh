#!/usr/bin/env bash
# The save directory's housekeeping:
#  - --save-retain-interval: after each save, the checkpoint the tracker named before is deleted
#    unless its iteration is a multiple of the interval (Megatron's save_checkpoint), a symbolic
#    link is kept, and the interval must be a multiple of --save-interval.
source "$(dirname "$0")/lib.sh"

FLAGS=(--device cpu --mock-data --vocab-size 256 --num-layers 1 --hidden-size 16
       --num-attention-heads 2 --seq-length 16 --max-position-embeddings 16 --micro-batch-size 2
       --global-batch-size 2 --lr 1e-3 --log-interval 1 --eval-iters 0 --seed 1234)

iters_in() { (cd "$1" && ls -d iter_* 2>/dev/null | tr '\n' ' '); }

# 7 iterations saved every 1, retained every 3: 3 and 6 stay, and the last (7)
S=$MC_TMP/retain
"$MC_BIN" "${FLAGS[@]}" --train-iters 7 --save "$S" --save-interval 1 --save-retain-interval 3 \
    >"$MC_TMP/out" 2>"$MC_TMP/err"
rc=$?
check "--save-retain-interval 3 trains (rc=$rc)" [ "$rc" -eq 0 ]
got=$(iters_in "$S")
check "keeps the multiples of 3 and the last checkpoint (got: $got)" \
    [ "$got" = "iter_0000003 iter_0000006 iter_0000007 " ]
check "says each deletion as Megatron" \
    grep -q "^  successfully deleted checkpoint from iteration       5 at $S\$" "$MC_TMP/out"
check "four deletions (1, 2, 4, 5; none of a multiple)" \
    [ "$(grep -c 'successfully deleted checkpoint' "$MC_TMP/out")" -eq 4 ]

# resumed: the tracker's iteration (7) goes after the next save
"$MC_BIN" "${FLAGS[@]}" --train-iters 8 --load "$S" --override-opt-param-scheduler --save "$S" --save-interval 1 \
    --save-retain-interval 3 >"$MC_TMP/out2" 2>"$MC_TMP/err2"
rc=$?
got=$(iters_in "$S")
check "resumed: the previous run's last checkpoint is deleted (rc=$rc, got: $got)" \
    [ "$got" = "iter_0000003 iter_0000006 iter_0000008 " ]
# a symbolic link in place of the previous checkpoint is kept
"$MC_BIN" "${FLAGS[@]}" --train-iters 4 --save "$MC_TMP/link" --save-interval 4 \
    --save-retain-interval 8 >/dev/null 2>&1
mv "$MC_TMP/link/iter_0000004" "$MC_TMP/real4" && ln -s "$MC_TMP/real4" "$MC_TMP/link/iter_0000004"
"$MC_BIN" "${FLAGS[@]}" --train-iters 8 --load "$MC_TMP/link" --override-opt-param-scheduler --save "$MC_TMP/link" \
    --save-interval 4 --save-retain-interval 8 \
    >"$MC_TMP/out3" 2>"$MC_TMP/err3"
check "a symbolic link is not deleted" [ -L "$MC_TMP/link/iter_0000004" ]
check "says it skipped the link" grep -q "skipping deleting checkpoint from iteration       4 at .* since it is a symbolic link" "$MC_TMP/out3"

expect_user_error "--save-retain-interval not a multiple of --save-interval" \
    "--save-retain-interval \(3\) must be a multiple of --save-interval \(2\)" \
    "${FLAGS[@]}" --train-iters 4 --save "$MC_TMP/bad" --save-interval 2 --save-retain-interval 3
