#!/usr/bin/env bash
# Small recipe features, as Megatron core_v0.15.0 does them:
#  - --log-progress: rank 0's <save>/progress.txt (training/utils.py append_to_progress_log,
#    training.py compute_throughputs_and_append_to_progress_log): the lines, their fields and
#    numbers, the cumulative throughput from the first "Starting job" of the latest run of this
#    world size;
#  - the checkpoint worker knobs accepted or refused by name.
source "$(dirname "$0")/lib.sh"

FLAGS=(--device cpu --mock-data --vocab-size 256 --num-layers 1 --hidden-size 16
       --num-attention-heads 2 --seq-length 16 --max-position-embeddings 16 --micro-batch-size 2
       --global-batch-size 2 --lr 1e-3 --log-interval 1 --eval-iters 0 --seed 1234)
# Megatron's num_floating_point_operations of this model per iteration: batch 2 x seq 16 x
# (mlp 6*16*(64*2*1) + attention 6*(16*48 + 16*16/2*2 + 16*16) + logits 6*16*256)
FLOPS_PER_ITER=$((2 * 16 * (6 * 16 * 128 + 6 * (768 + 256 + 256) + 6 * 16 * 256)))

# ---- --log-progress ----
P=$MC_TMP/progress
mkdir -p "$P"
# an earlier history: a run of 1 rank, then one of 8 (which restarts the search), then the
# latest run of 1 rank started 1000 s ago after a save of -3.6e15 operations (a planted value:
# the cumulative throughput then reads 3.6 TFLOP/s/GPU whatever this machine's speed)
at() { date -d "@$(($(date +%s) - $1))" '+%Y-%m-%d %H:%M:%S'; }
line() { printf '%s\tJob ID: %s\t# GPUs: %s\t%s\n' "$(at "$1")" "$2" "$3" "$4"; }
saved() { printf 'Saved checkpoint\tIteration: 1\tJob throughput: 0.0 TFLOP/s/GPU\tCumulative throughput: 0.0 TFLOP/s/GPU\tFloating-point operations: %s\tTokens (in billions): 0.00' "$1"; }
{
    line 5000 11 1 "Starting job"
    line 4000 11 1 "$(saved 9.00e+15)"
    line 3000 12 8 "Starting job"
    line 2000 12 8 "$(saved -3.60e+15)"
    line 1000 13 1 "Starting job"
} >"$P/progress.txt"
SLURM_JOB_ID=4242 "$MC_BIN" "${FLAGS[@]}" --train-iters 4 --save "$P" --save-interval 2 --log-progress \
    >"$MC_TMP/out" 2>"$MC_TMP/err"
rc=$?
check "--log-progress trains and saves (rc=$rc)" [ "$rc" -eq 0 ]
new=$(tail -n +6 "$P/progress.txt")
check "three lines appended: Starting job, two saves (got: $(wc -l <<<"$new"))" [ "$(wc -l <<<"$new")" -eq 3 ]
stamp='[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}'
check "Megatron's prefix: time, SLURM_JOB_ID, world size; then 'Starting job'" \
    grep -qxE "$stamp	Job ID: 4242	# GPUs: 1	Starting job" <<<"$(sed -n 1p <<<"$new")"
expect_saved() { # line iteration operations tokens
    grep -qxE "$stamp	Job ID: 4242	# GPUs: 1	Saved checkpoint	Iteration: $2	Job throughput: [0-9]+\.[0-9] TFLOP/s/GPU	Cumulative throughput: 3\.6 TFLOP/s/GPU	Floating-point operations: $3	Tokens \(in billions\): $4" <<<"$1"
}
ops2=$(printf '%.2e' $((2 * FLOPS_PER_ITER))) ops4=$(printf '%.2e' $((4 * FLOPS_PER_ITER)))
check "the save at 2: operations $ops2 (Megatron's formula), cumulative from the latest 1-rank start (3.6)" \
    expect_saved "$(sed -n 2p <<<"$new")" 2 "${ops2/+/\\+}" 0.00
check "the save at 4: operations $ops4" expect_saved "$(sed -n 3p <<<"$new")" 4 "${ops4/+/\\+}" 0.00

"$MC_BIN" "${FLAGS[@]}" --train-iters 2 --save "$MC_TMP/p2" --save-interval 2 --log-progress --async-save \
    >"$MC_TMP/out2" 2>"$MC_TMP/err2"
rc=$?
check "--async-save: the line says 'Saving async checkpoint' (rc=$rc)" \
    grep -qE "	Saving async checkpoint	Iteration: 2	" "$MC_TMP/p2/progress.txt"

# ---- the checkpoint worker knobs and the profiler flags, accepted or refused by name ----
"$MC_BIN" "${FLAGS[@]}" --train-iters 2 --save "$MC_TMP/w" --save-interval 2 --async-save \
    --use-persistent-ckpt-worker --ckpt-assume-constant-structure >"$MC_TMP/out" 2>"$MC_TMP/err"
rc=$?
check "--use-persistent-ckpt-worker and --ckpt-assume-constant-structure are accepted (rc=$rc)" \
    bash -c "[ $rc -eq 0 ] && [ -f '$MC_TMP/w/iter_0000002/mp_rank_00/model_optim_rng.pt' ]"
for f in "--non-persistent-save-interval 2" "--non-persistent-ckpt-type global" \
         "--non-persistent-global-ckpt-dir $MC_TMP/np" "--non-persistent-local-ckpt-dir $MC_TMP/np" \
         "--non-persistent-local-ckpt-algo atomic"; do
    # shellcheck disable=SC2086 # the flag and its value
    expect_user_error "${f%% *} is refused by name (non-persistent checkpoints)" \
        "${f%% *} is recognised but not implemented yet in megatron-c \(non-persistent checkpoints" \
        "${FLAGS[@]}" --train-iters 1 $f
done
expect_user_error "--use-pytorch-profiler is refused with its reason" \
    "--use-pytorch-profiler is recognised but not implemented yet in megatron-c \(torch.profiler's" \
    "${FLAGS[@]}" --train-iters 1 --profile --use-pytorch-profiler
"$MC_BIN" "${FLAGS[@]}" --train-iters 2 --profile --profile-step-start 0 --profile-step-end 1 \
    --profile-ranks 0 >"$MC_TMP/out" 2>"$MC_TMP/err"
rc=$?
check "--profile on the CPU backend: trains, one note line that no CUDA profiler is used (rc=$rc)" \
    bash -c "[ $rc -eq 0 ] && [ \$(grep -c '^> --profile' '$MC_TMP/out') -eq 1 ] &&
             grep -qx '> --profile: the cpu backend has no CUDA profiler, so nothing is captured (cudaProfilerStart/Stop and NVTX ranges need --device cuda)' '$MC_TMP/out'"

# ---- two data-parallel ranks: the weight hash check, progress.txt written once ----
source "$(dirname "$0")/mpi.sh"
D=(--device cpu --mock-data --vocab-size 256 --num-layers 1 --hidden-size 16 --num-attention-heads 2
   --seq-length 16 --max-position-embeddings 16 --micro-batch-size 2 --global-batch-size 4
   --log-interval 1 --eval-iters 0 --seed 1234 --train-iters 4
   --check-weight-hash-across-dp-replicas-interval 2)
"${MPIRUN[@]}" -np 2 "$MC_BIN" "${D[@]}" --lr 1e-3 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather \
    --save "$MC_TMP/dp" --save-interval 4 --log-progress >"$MC_TMP/out" 2>"$MC_TMP/err"
rc=$?
check "dp 2 (distributed optimizer, overlapped gather): the hashes match before training and after 2 and 4 iterations (rc=$rc)" \
    bash -c "[ $rc -eq 0 ] && [ \"\$(grep '^>>> Weight hashes' '$MC_TMP/out')\" = \"\$(printf '>>> Weight hashes match after %d iterations...\n' 0 2 4)\" ]"
check "dp 2: progress.txt has one line per event, '# GPUs: 2'" \
    bash -c "[ \$(wc -l <'$MC_TMP/dp/progress.txt') -eq 2 ] && [ \$(grep -c '	# GPUs: 2	' '$MC_TMP/dp/progress.txt') -eq 2 ]"
# replicas that diverge: rank 1 steps with another learning rate (MPMD, every other flag alike), so
# the replicas are equal at the start and differ after the first update
"${MPIRUN[@]}" -np 1 "$MC_BIN" "${D[@]}" --lr 1e-3 : -np 1 "$MC_BIN" "${D[@]}" --lr 2e-3 \
    >"$MC_TMP/out" 2>"$MC_TMP/err"
rc=$?
check "diverged replicas: match before training, then the job stops at the check after 2 iterations (rc=$rc)" \
    bash -c "[ $rc -ne 0 ] && [ \"\$(grep '^>>> Weight hashes' '$MC_TMP/out')\" = '>>> Weight hashes match after 0 iterations...' ] &&
             ! grep -q 'iteration        3/' '$MC_TMP/out'"
check "one error line, with Megatron's assertion message" \
    bash -c "[ \$(grep -c '^megatron-c: .*error: ' '$MC_TMP/err') -eq 1 ] &&
             grep -qx 'megatron-c: rank 0: error: Parameter hashes not matching across DP replicas (after 2 iterations)' '$MC_TMP/err'"
check "the differing rank names the tensors (Megatron's log line)" \
    grep -q "^megatron-c: warning: \[Rank 1\] Hash not matching for decoder.layers.0.mlp.linear_fc2.weight in model chunk0$" "$MC_TMP/err"

# ---- --profile on the emulated CUDA device: the profiler calls at Megatron's iterations ----
# (test/emu's cudaProfilerStart/Stop say themselves on stderr, merged here with the log lines)
if [ -n "${MC_EMU_BUILD:-}" ] && [ -x "$MC_EMU_BUILD/megatron-c" ]; then
    EMU=("${FLAGS[@]/cpu/cuda}" --train-iters 4 --distributed-backend mpi)
    "$MC_EMU_BUILD/megatron-c" "${EMU[@]}" --profile --profile-step-start 1 --profile-step-end 3 \
        >"$MC_TMP/emu" 2>&1
    rc=$?
    got=$(grep -oE '^ \[[^]]*\] iteration +[0-9]+|^cuda-emu: cudaProfiler[A-Za-z]+' "$MC_TMP/emu" |
          sed -E 's/.*iteration +/it/; s/cuda-emu: cudaProfiler//' | tr '\n' ' ')
    check "--profile-step-start 1 --profile-step-end 3: cudaProfilerStart after iteration 1, Stop after 3 (rc=$rc; $got)" \
        [ "$got" = "it1 Start it2 it3 Stop it4 " ]
    "$MC_EMU_BUILD/megatron-c" "${EMU[@]}" --profile --profile-step-start 1 --profile-step-end 3 \
        --profile-ranks 1 >"$MC_TMP/emu" 2>&1
    rc=$?
    check "--profile-ranks 1 on a one-rank job: no profiler call on rank 0 (rc=$rc)" \
        bash -c "[ $rc -eq 0 ] && ! grep -q cudaProfiler '$MC_TMP/emu'"
else
    skip "--profile on the emulated device" "no emulated build (MC_EMU_BUILD='${MC_EMU_BUILD:-}'; make emu)"
fi
