#!/usr/bin/env bash
# Checkpoints under context parallelism (issue 32): the cp ranks hold the same weights
# (--check-weight-hash-across-dp-replicas-interval checks them over dp x cp), and a run saved at
# cp 2 resumes at cp 1, and one saved at cp 1 resumes at cp 2, with the losses, grad norms and
# params norms of the uninterrupted run (iterations 13..24 within same_log_numbers' 1e-5), in
# Megatron's legacy format and in torch_dist, with the distributed optimizer sharded over dp x cp.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

if ! have_mpirun; then
    skip "context-parallel checkpoints" "mpirun is not installed (scripts/install-deps.sh installs OpenMPI)"
    exit 0
fi

FLAGS=(--device cpu --mock-data --vocab-size 256 --make-vocab-size-divisible-by 64 --num-layers 2
       --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
       --micro-batch-size 2 --global-batch-size 8 --train-iters 24 --lr 3e-3
       --lr-decay-style cosine --lr-warmup-iters 3 --min-lr 1e-4 --weight-decay 0.1
       --clip-grad 1.0 --log-interval 1 --eval-interval 12 --eval-iters 2 --seed 1234
       --hidden-dropout 0.1 --attention-dropout 0.1 --log-params-norm
       --use-distributed-optimizer --overlap-grad-reduce)

run_cp() { # cp args...: one rank directly, more under mpirun
    local cp=$1
    shift
    if [ "$cp" -eq 1 ]; then "$MC_BIN" "${FLAGS[@]}" "$@"; else mpirun_mc "$cp" "${FLAGS[@]}" --context-parallel-size "$cp" "$@"; fi
}

# iterations 13 and 15..24 of a log (a resumed run's second log line also averages its first
# iteration, as Megatron main's training_log does: test_checkpoint.sh's resumed_lines)
tail_numbers() { log_numbers "$1" | grep -v '^val' | tail -n 12 | sed 2d; }
same_tail() { # reference resumed
    paste -d' ' <(tail_numbers "$1") <(tail_numbers "$2") | awk '
        function rel(a, b) { d = a - b; if (d < 0) d = -d; return d / (a < 0 ? -a : a) }
        { n++; if (NF != 6 || rel($1, $4) > 1e-5 || rel($2, $5) > 1e-4 || rel($3, $6) > 1e-5) bad++ }
        END { exit !(n == 11 && !bad) }'
}

run_cp 1 >"$MC_TMP/cp1" 2>"$MC_TMP/cp1.err"
check "cp 1 reference run (exit 0)" test $? -eq 0
run_cp 2 --check-weight-hash-across-dp-replicas-interval 6 >"$MC_TMP/cp2" 2>"$MC_TMP/cp2.err"
check "cp 2 gives the cp 1 numbers" same_log_numbers "$MC_TMP/cp1" "$MC_TMP/cp2"
check "cp 2: the two cp ranks hold the same weights (hashes over dp x cp, every 6 iterations)" \
    bash -c "[ \$(grep -c '>>> Weight hashes match after' '$MC_TMP/cp2') -eq 5 ]"

for fmt in torch torch_dist; do
    for pair in "2 1" "1 2"; do
        set -- $pair
        dir=$MC_TMP/ckpt-$fmt-cp$1
        run_cp "$1" --ckpt-format "$fmt" --save "$dir" --save-interval 12 --exit-interval 12 \
            >"$MC_TMP/save" 2>"$MC_TMP/save.err"
        rc=$?
        run_cp "$2" --ckpt-format "$fmt" --load "$dir" >"$MC_TMP/resumed" 2>"$MC_TMP/resumed.err"
        rc2=$?
        if [ $rc -ne 0 ] || [ $rc2 -ne 0 ]; then
            not_ok "$fmt: saved at cp $1, resumed at cp $2 (rc $rc, $rc2: $(tail -c 300 "$MC_TMP/save.err") $(tail -c 300 "$MC_TMP/resumed.err"))"
            continue
        fi
        name="$fmt: saved at cp $1 (iteration 12), resumed at cp $2: iterations 13..24 as without the stop (14 is logged with 13)"
        if grep -q 'loaded checkpoint from .* at iteration 12' "$MC_TMP/resumed" &&
            same_tail "$MC_TMP/cp1" "$MC_TMP/resumed"; then
            ok "$name"
        else
            not_ok "$name ($(paste -d' ' <(tail_numbers "$MC_TMP/cp1") <(tail_numbers "$MC_TMP/resumed") | head -3))"
        fi
    done
done
# a legacy checkpoint of cp 2 has the files of one replica: cp rank 0 of dp rank 0 writes
check "torch at cp 2: one mp_rank_00 with model_optim_rng.pt and distrib_optim.pt" \
    bash -c "[ \$(ls '$MC_TMP/ckpt-torch-cp2/iter_0000012') = mp_rank_00 ] && [ -f '$MC_TMP/ckpt-torch-cp2/iter_0000012/mp_rank_00/distrib_optim.pt' ]"

# the comparison can fail: a resume without the optimizer state differs
run_cp 2 --load "$MC_TMP/ckpt-torch-cp1" --no-load-optim >"$MC_TMP/noopt" 2>&1
if same_tail "$MC_TMP/cp1" "$MC_TMP/noopt"; then
    not_ok "the comparison can fail (--no-load-optim is not an exact resume)"
else
    ok "the comparison can fail (--no-load-optim is not an exact resume)"
fi
