#!/usr/bin/env bash
# --tp-comm-overlap (issue 34): with sequence parallelism, tp 2 and tp 4 runs with the overlap
# (the all-gathers and reduce-scatters of the layers' linears in chunks beside their GEMMs, the
# backward's bulk overlaps) give the runs' numbers without it (lm loss within 1e-6 relative,
# grad and params norms as printed) over 20 iterations, for GPT and Llama blocks with the
# distributed optimizer, under mpirun; the comm layer's counts show the chunks; without sequence
# parallelism the flag is refused as in Megatron.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

# Megatron: sequence parallelism is off at tp 1, and the overlap needs it
expect_user_error "--tp-comm-overlap without sequence parallelism is refused" \
    '--tp-comm-overlap needs --sequence-parallel' --device cpu --mock-data --vocab-size 256 --num-layers 2 \
    --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32 \
    --micro-batch-size 2 --train-iters 1 --lr 1e-3 --sequence-parallel --tp-comm-overlap

if ! have_mpirun; then
    skip "tp communication overlap" "mpirun is not installed (scripts/install-deps.sh installs OpenMPI)"
    exit 0
fi

FLAGS=(--device cpu --mock-data --vocab-size 256 --make-vocab-size-divisible-by 64 --num-layers 2
       --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
       --micro-batch-size 2 --global-batch-size 8 --train-iters 20 --lr 3e-3
       --lr-decay-style cosine --lr-warmup-iters 3 --min-lr 1e-4 --weight-decay 0.1
       --clip-grad 1.0 --log-interval 1 --eval-iters 0 --seed 1234
       --hidden-dropout 0.1 --attention-dropout 0.1 --log-params-norm
       --sequence-parallel --use-distributed-optimizer)
LLAMA=(--position-embedding-type rope --normalization RMSNorm --swiglu --group-query-attention
       --num-attention-heads 8 --num-query-groups 4 --disable-bias-linear --untie-embeddings-and-output-weights)

# 20 iterations, each loss within 1e-6 relative, the norms as printed
same_numbers() {
    paste -d' ' <(log_numbers "$1") <(log_numbers "$2") | awk '
        function rel(a, b) { d = a - b; if (d < 0) d = -d; m = (a < 0 ? -a : a); return m > 0 ? d / m : d }
        NF != 6 || rel($1, $4) > 1e-6 || $2 != $5 || $3 != $6 { bad++ }
        { n++ }
        END { exit !(n == 20 && bad == 0) }'
}

overlap_equals() { # name np flags...: the run with --tp-comm-overlap against the one without
    local name=$1 np=$2
    shift 2
    mpirun_mc "$np" "${FLAGS[@]}" "$@" >"$MC_TMP/off" 2>"$MC_TMP/off.err"
    local rc1=$?
    mpirun_mc "$np" "${FLAGS[@]}" "$@" --tp-comm-overlap --timing-log-level 1 >"$MC_TMP/on" 2>"$MC_TMP/on.err"
    local rc2=$?
    if [ $rc1 -ne 0 ] || [ $rc2 -ne 0 ]; then
        not_ok "$name exits 0 (rc=$rc1/$rc2: $(tail -c 400 "$MC_TMP/off.err") $(tail -c 400 "$MC_TMP/on.err"))"
        return
    fi
    check "$name: --tp-comm-overlap gives the same losses and norms over 20 iterations" \
        same_numbers "$MC_TMP/off" "$MC_TMP/on"
}

# per iteration: 2 microbatches (on each of dp 2) x 2 layers x 4 all-gathers (linear_qkv, linear_fc1 forward,
# linear_proj, linear_fc2 output gradient) x 4 chunks are p2p batches
p2p_calls() { grep -m1 'tp p2p' "$MC_TMP/on" | sed -E 's/.*: \(([0-9.]+), .*/\1/'; }

overlap_equals "GPT, tp 2 x dp 2" 4 --tensor-model-parallel-size 2
check "GPT, tp 2: the comm layer counts 4 chunks per all-gather (64 p2p batches per iteration: $(p2p_calls))" \
    test "$(p2p_calls)" = 64.0
overlap_equals "GPT, tp 4" 4 --tensor-model-parallel-size 4
# --tp-comm-overlap-cfg: num_splits 2 (2 microbatches x 2 layers x 4 all-gathers x 2 chunks = 32
# p2p batches per iteration; its refusals: test/unit/config/test_tp_overlap_cfg.c)
printf 'qkv_fprop:\n  method: ring_exchange\n  num_splits: 2\nproj_fprop: {method: pipeline, num_splits: 2}\n' >"$MC_TMP/ub.yaml"
CFG_RUN=("${FLAGS[@]}" --tensor-model-parallel-size 2 --global-batch-size 4 --train-iters 2 --lr-warmup-iters 0 --tp-comm-overlap
         --timing-log-level 1)
mpirun_mc 2 "${CFG_RUN[@]}" --tp-comm-overlap-cfg "$MC_TMP/ub.yaml" >"$MC_TMP/on" 2>"$MC_TMP/on.err"
check "--tp-comm-overlap-cfg with num_splits 2: the comm layer counts 2 chunks per all-gather (32 p2p batches per iteration: $(p2p_calls))" \
    test "$(p2p_calls)" = 32.0
overlap_equals "Llama, tp 2 x dp 2" 4 --tensor-model-parallel-size 2 "${LLAMA[@]}"
overlap_equals "Llama, tp 4" 4 --tensor-model-parallel-size 4 "${LLAMA[@]}"

# The parameters after 12 steps at tp 4 with the overlap, gathered over tp, equal the single-rank
# model's (test/mpi/test_tp_params trains both in one job with the same microbatches)
PROG=${MC_BUILD:-build/rel}/test/mpi/test_tp_params
"${MPIRUN[@]}" -np 4 "$PROG" --tensor-model-parallel-size 4 --sequence-parallel --tp-comm-overlap \
    >"$MC_TMP/params" 2>"$MC_TMP/params.err"
rc=$?
check "tp 4 with the overlap: gathered parameters equal the single-rank ones after 12 steps (rc=$rc)" \
    bash -c "[ $rc -eq 0 ] && grep -q '^ok - 28 tensors after 12 steps' '$MC_TMP/params' && ! grep -q '^not ok' '$MC_TMP/params'"

# The same schedule through the CUDA backend on the emulated device (test/emu; two ranks share it,
# so MPI carries the collectives, staged through host memory): tp 2 with the overlap gives the
# CPU's numbers without it (6 iterations; the GEMMs and kernels are the CUDA backend's).
if [ -z "${MC_EMU_BUILD:-}" ] || [ ! -x "$MC_EMU_BUILD/megatron-c" ]; then
    skip "tp communication overlap on the emulated CUDA device" "no emulated build (MC_EMU_BUILD='${MC_EMU_BUILD:-}'; make emu)"
else
    EMU_FLAGS=("${FLAGS[@]}" --tensor-model-parallel-size 2 --global-batch-size 4 --train-iters 6)
    mpirun_mc 2 "${EMU_FLAGS[@]}" >"$MC_TMP/cpu" 2>"$MC_TMP/cpu.err"
    "${MPIRUN[@]}" -np 2 "$MC_EMU_BUILD/megatron-c" "${EMU_FLAGS[@]/#cpu/cuda}" --distributed-backend mpi \
        --tp-comm-overlap >"$MC_TMP/emu" 2>"$MC_TMP/emu.err"
    rc=$?
    name="tp 2 with --tp-comm-overlap on the emulated CUDA device gives the CPU's numbers without it"
    if [ $rc -eq 0 ] && grep -q '^> device: cuda' "$MC_TMP/emu" && same_log_numbers "$MC_TMP/cpu" "$MC_TMP/emu" 6; then
        ok "$name"
    else
        not_ok "$name (rc=$rc: $(tail -c 300 "$MC_TMP/emu.err"))"
    fi
fi
