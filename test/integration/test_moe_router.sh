#!/usr/bin/env bash
# The MoE router's options end to end (the kernels' arithmetic is test_kernels_moe's, against
# Megatron's own moe_utils run by torch; the CUDA kernels' is test_gpu_moe's): a tiny MoE model
# (2 layers x 8 experts, top-4) with sigmoid scores, group-limited routing (4 groups, 2 kept),
# a top-k scaling factor, the aux loss and aux-loss-free balancing (--moe-router-enable-expert-bias
# with a large rate, so that the bias moves the choices within a few steps). The expert bias is
# updated once per global batch from the token counts summed over tp x dp x cp: dp 2 and ep 2
# (each rank counting its own tokens) give the single rank's numbers over 8 iterations, and the
# same run on the emulated GPU (the CUDA routing and bias kernels) its first 4. A zero rate is the
# run without expert bias line for line; the bias changes the run. --moe-router-pre-softmax and
# --moe-router-dtype fp32 (an fp32 run: the same numbers) train too.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

BASE=(--device cpu --mock-data --vocab-size 128 --num-layers 2 --hidden-size 32
      --num-attention-heads 4 --ffn-hidden-size 64 --seq-length 32 --max-position-embeddings 32
      --position-embedding-type rope --normalization RMSNorm --swiglu
      --untie-embeddings-and-output-weights --disable-bias-linear --num-experts 8
      --moe-ffn-hidden-size 16 --moe-router-topk 4 --moe-router-load-balancing-type aux_loss
      --moe-aux-loss-coeff 1e-2 --moe-token-dispatcher-type alltoall --micro-batch-size 2
      --global-batch-size 8 --train-iters 8 --lr 3e-3 --lr-decay-style cosine
      --lr-warmup-iters 2 --lr-decay-iters 8 --min-lr 1e-4 --clip-grad 1.0 --log-interval 1
      --log-params-norm --eval-iters 0 --eval-interval 1000 --seed 1234 --hidden-dropout 0.1
      --attention-dropout 0.1)
SIGMOID=(--moe-router-score-function sigmoid --moe-router-num-groups 4 --moe-router-group-topk 2
         --moe-router-topk-scaling-factor 2.5)
FLAGS=("${BASE[@]}" "${SIGMOID[@]}" --moe-router-enable-expert-bias --moe-router-bias-update-rate 0.05)

# each iteration's lm loss, load_balancing_loss, grad norm and params norm, one line
numbers() {
    sed -nE 's/.* iteration +([0-9]+)\/.*\| lm loss: ([0-9.E+-]+) \| load_balancing_loss: ([0-9.E+-]+) \|.*grad norm: ([0-9.]+) \| params norm: ([0-9.]+) \|.*/\1 \2 \3 \4 \5/p' "$1"
}
# same REF RUN [N]: RUN's N (8) iterations are REF's first N, every number within 1e-5 relative
same() {
    local n=${3:-8}
    paste -d' ' <(numbers "$1" | head -n "$n") <(numbers "$2") | awk -v want="$n" '
        function rel(a, b) { d = a - b; if (d < 0) d = -d; m = (a < 0 ? -a : a); return m > 0 ? d / m : d }
        NF != 10 || $1 != $6 { bad++; next }
        { n++; for (i = 2; i <= 5; i++) if (rel($i, $(i + 5)) > 1e-5) bad++ }
        END { exit !(n == want && bad == 0) }'
}

"$MC_BIN" "${FLAGS[@]}" >"$MC_TMP/single" 2>&1
check "sigmoid, group-limited, scaled routing with expert bias trains (exit 0; $(tail -c 200 "$MC_TMP/single" | tr '\n' ' '))" \
    test "$(numbers "$MC_TMP/single" | wc -l)" -eq 8

# the bias: a zero rate keeps it zero (the plain sigmoid run's lines); a rate moves the choices
"$MC_BIN" "${BASE[@]}" "${SIGMOID[@]}" >"$MC_TMP/nobias" 2>&1
"$MC_BIN" "${BASE[@]}" "${SIGMOID[@]}" --moe-router-enable-expert-bias \
    --moe-router-bias-update-rate 0 >"$MC_TMP/rate0" 2>&1
check "expert bias with a zero rate is the run without it, number for number" \
    cmp -s <(numbers "$MC_TMP/nobias") <(numbers "$MC_TMP/rate0")
check "the run without it has 8 iterations" test "$(numbers "$MC_TMP/nobias" | wc -l)" -eq 8
if same "$MC_TMP/nobias" "$MC_TMP/single"; then
    not_ok "the expert bias changes the routing (the comparisons can fail)"
else
    ok "the expert bias changes the routing (the comparisons can fail)"
fi

if have_mpirun; then
    for layout in "dp 2:" "ep 2:--expert-model-parallel-size 2"; do
        name=${layout%%:*}
        # shellcheck disable=SC2086
        mpirun_mc 2 "${FLAGS[@]}" ${layout#*:} >"$MC_TMP/par" 2>&1
        check "$name (each rank counting its tokens, the counts summed) gives the single rank's lm loss, load_balancing_loss, grad and params norms ($(tail -c 200 "$MC_TMP/par" | tr '\n' ' '))" \
            same "$MC_TMP/single" "$MC_TMP/par"
    done
else
    skip "expert bias at dp 2 and ep 2" "no mpirun"
fi

EMU_BIN=${MC_EMU_BUILD:-}/megatron-c
if [ -n "${MC_EMU_BUILD:-}" ] && [ -x "$EMU_BIN" ]; then
    "$EMU_BIN" "${FLAGS[@]}" --device cuda --train-iters 4 >"$MC_TMP/emu" 2>&1
    check "the emulated GPU (CUDA routing and expert-bias kernels) gives the CPU's first 4 iterations ($(tail -c 200 "$MC_TMP/emu" | tr '\n' ' '))" \
        same "$MC_TMP/single" "$MC_TMP/emu" 4
else
    skip "expert bias on the emulated GPU" "no build/emu/megatron-c (make EMU=1)"
fi

# softmax before the top-k with a scaling factor; --moe-router-dtype fp32 in an fp32 run
"$MC_BIN" "${BASE[@]}" --moe-router-pre-softmax --moe-router-topk-scaling-factor 2 \
    --train-iters 3 >"$MC_TMP/pre" 2>&1
"$MC_BIN" "${BASE[@]}" --moe-router-pre-softmax --moe-router-topk-scaling-factor 2 \
    --moe-router-dtype fp32 --train-iters 3 >"$MC_TMP/pre32" 2>&1
check "pre-softmax routing trains 3 iterations" test "$(numbers "$MC_TMP/pre" | wc -l)" -eq 3
check "--moe-router-dtype fp32 in an fp32 run gives the same numbers" \
    cmp -s <(numbers "$MC_TMP/pre") <(numbers "$MC_TMP/pre32")
