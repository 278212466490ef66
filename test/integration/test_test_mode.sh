#!/usr/bin/env bash
# --test-mode (Megatron's Attention.run_realtime_tests: with --qk-layernorm the q/k layernorm
# parameters are compared across dp and tp ranks at every step; equal, the run is unchanged) and
# the --wandb-* flags (accepted; one note on rank 0 says where the metrics are). The comparison
# itself, a planted discrepancy included, is test/unit/train/test_realtime_test.c.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

FLAGS=(--device cpu --mock-data --vocab-size 256 --num-layers 2 --hidden-size 32
       --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32 --micro-batch-size 1
       --global-batch-size 2 --train-iters 3 --lr 3e-3 --log-interval 1 --eval-iters 1
       --eval-interval 3 --seed 1234 --qk-layernorm)
WANDB=(--wandb-project proj --wandb-exp-name exp --wandb-entity ent --wandb-save-dir "$MC_TMP/wb")
NOTE='megatron-c: warning: --wandb-project proj: Weights & Biases is a Python service megatron-c does not run; the metrics are in --tensorboard-dir ('

"$MC_BIN" "${FLAGS[@]}" --test-mode "${WANDB[@]}" --tensorboard-dir "$MC_TMP/tb" >"$MC_TMP/one" 2>"$MC_TMP/one.err"
check "--test-mode and --wandb-* start and train (one rank, exit 0)" \
    test $? -eq 0 -a "$(grep -c 'iteration        3/       3 |' "$MC_TMP/one")" = 1
check "the wandb note appears once" test "$(grep -cF "$NOTE" "$MC_TMP/one.err")" = 1
check "no wandb directory is made" test ! -e "$MC_TMP/wb"

# a line with a problem gets its error alone (the note is for a run that starts)
expect_user_error "--wandb-project on a refused line: the error line only" "num-attention-heads" \
    "${FLAGS[@]}" "${WANDB[@]}" --num-attention-heads 5

if have_mpirun; then
    mpirun_mc 2 "${FLAGS[@]}" --tensor-model-parallel-size 2 --test-mode "${WANDB[@]}" \
        --tensorboard-dir "$MC_TMP/tb2" >"$MC_TMP/tp" 2>"$MC_TMP/tp.err"
    rc=$?
    check "--test-mode under tp 2 with --qk-layernorm: the parameters agree, the run ends (exit 0)" \
        test $rc -eq 0 -a "$(grep -c 'iteration        3/       3 |' "$MC_TMP/tp")" = 1
    check "the wandb note appears once for the job" test "$(grep -cF "$NOTE" "$MC_TMP/tp.err")" = 1
    check "--test-mode under tp 2 gives the one-rank lines" same_log_numbers "$MC_TMP/one" "$MC_TMP/tp" 3
else
    skip "--test-mode under tp 2" "mpirun is not installed"
fi
