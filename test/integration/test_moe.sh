#!/usr/bin/env bash
# The MoE layer (model/moe.c) against Megatron-LM's own run (../shared/data/megatron-ref/moe,
# HOW-MADE.md): its tiny Mixtral-like model (4 layers x 4 experts, top-2 softmax router,
# aux_loss 1e-2) saved by Megatron after 5 iterations at ep1; megatron-c loads the weights
# (torch_dist, the experts' [L, E, FFN1, H] keys) and its iteration 6 -- the loaded weights' lm
# loss, load_balancing_loss and grad norm, which the optimizer state does not touch -- is
# Megatron's line for line, on the CPU and on the emulated GPU. A run from scratch logs
# load_balancing_loss each iteration, and gives the same lines at dp 2 and pp 2 (every rank holds
# every expert: the aux loss's statistics are per rank, the logged value averaged over dp).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

source "$(dirname "$0")/moe_ref.sh"
moe_ref_or_skip "the MoE layer against Megatron's ep1 run"
FLAGS=("${MOE_REF_FLAGS[@]}" --use-distributed-optimizer --ckpt-format torch_dist)
# Megatron's load balancing of its run; the mixed case below has its own
FLAGS_NO_LB=("${FLAGS[@]}")
FLAGS+=(--moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-2)

# same_fields A B [REL]: the same field lines (name: value |), the values within REL (1e-5)
# relative (the float32 sums over microbatches and ranks run in another order at another
# layout), a grad norm (%.3f) within its last digit
same_fields() {
    paste -d'\t' "$1" "$2" | awk -F'\t' -v want="$(wc -l <"$1")" -v rel="${3:-1e-5}" '
        { split($1, a, ": "); split($2, b, ": "); sub(/ \|$/, "", a[2]); sub(/ \|$/, "", b[2])
          d = a[2] - b[2]; if (d < 0) d = -d; m = a[2] < 0 ? -a[2] : a[2]
          if (a[1] != b[1] || (d > rel * m && !(a[1] == "grad norm" && d <= 0.0011 + rel * m))) bad++; n++ }
        END { exit !(n == want && n > 0 && bad == 0) }'
}

# the fields of iteration 6 that depend on the weights and the data alone
fields() { grep 'iteration        6/' "$1" | grep -o 'lm loss: [^|]*|\|load_balancing_loss: [^|]*|\|grad norm: [^|]*|'; }

"$MC_BIN" "${FLAGS[@]}" --data-cache-path "$MC_TMP/cache" --load "$REF/ep1" --no-load-optim \
    --no-load-rng --exit-interval 6 >"$MC_TMP/ep1" 2>&1
rc=$?
check "the ep1 MoE model loads from Megatron's torch_dist checkpoint and trains (rc=$rc $(tail -c 300 "$MC_TMP/ep1"))" test $rc -eq 0
fields "$REF/ep1.continuation.log" >"$MC_TMP/want"
fields "$MC_TMP/ep1" >"$MC_TMP/got"
check "iteration 6 has Megatron's lm loss, load_balancing_loss and grad norm ($(tr '\n' ' ' <"$MC_TMP/got"); Megatron: $(tr '\n' ' ' <"$MC_TMP/want"))" \
    cmp -s "$MC_TMP/want" "$MC_TMP/got"
check "the comparison has three fields" test "$(wc -l <"$MC_TMP/want")" -eq 3

# the comparison can fail: top-1 routing is another model
"$MC_BIN" "${FLAGS[@]}" --data-cache-path "$MC_TMP/cache" --load "$REF/ep1" --no-load-optim \
    --no-load-rng --exit-interval 6 --moe-aux-loss-coeff 2e-2 >"$MC_TMP/other" 2>&1
fields "$MC_TMP/other" >"$MC_TMP/other.f"
if cmp -s "$MC_TMP/want" "$MC_TMP/other.f"; then
    not_ok "the comparison can fail (twice the aux loss coefficient changes the grad norm)"
else
    ok "the comparison can fail (twice the aux loss coefficient changes the grad norm)"
fi

# from scratch: the load-balancing loss near 1 (balanced) is logged each iteration
"$MC_BIN" "${FLAGS[@]}" --data-cache-path "$MC_TMP/cache" --train-iters 4 >"$MC_TMP/scratch" 2>&1
check "a run from scratch logs load_balancing_loss each iteration" \
    test "$(grep -c 'load_balancing_loss: [0-9.]*E+00 |' "$MC_TMP/scratch")" -eq 4
# every logged iteration's lm loss, load_balancing_loss and grad norm
all_fields() { grep ' iteration ' "$1" | grep -o 'lm loss: [^|]*|\|load_balancing_loss: [^|]*|\|grad norm: [^|]*|'; }
all_fields "$MC_TMP/scratch" >"$MC_TMP/scratch.f"
if have_mpirun; then
    for layout in "dp 2:" "pp 2:--pipeline-model-parallel-size 2"; do
        name=${layout%%:*}
        # shellcheck disable=SC2086
        mpirun_mc 2 "${FLAGS[@]}" --data-cache-path "$MC_TMP/cache" --train-iters 4 \
            ${layout#*:} >"$MC_TMP/par" 2>&1
        all_fields "$MC_TMP/par" >"$MC_TMP/par.f"
        check "$name gives the single rank's lm loss, load_balancing_loss and grad norm ($(tail -c 300 "$MC_TMP/par" | tr '\n' ' '))" \
            same_fields "$MC_TMP/scratch.f" "$MC_TMP/par.f"
    done
else
    skip "the MoE layer at dp 2 and pp 2" "no mpirun"
fi

# Dense layers among MoE layers (layers 1 and 2 dense) and every router loss at once (aux_loss,
# seq_aux_loss and global_aux_loss, each with its coefficient, and the z-loss): each logged under
# Megatron's name in training_log's order, each iteration's value in TensorBoard; pp 2 (a stage
# of an MoE and a dense layer) and pp 2 with vpp 2 (a rank's two chunks: an MoE and a dense layer
# in one activation slot) give the single rank's numbers; dp 2 too, without global_aux_loss
# (its token counts span the data-parallel ranks, another loss than one rank's).
MIXED=("${FLAGS_NO_LB[@]}" --moe-layer-freq "[1,0,0,1]" --moe-z-loss-coeff 1e-3 --train-iters 4)
LOSSES=(--moe-router-load-balancing-type aux_loss seq_aux_loss global_aux_loss
        --moe-aux-loss-coeff 1e-2 2e-2 3e-2)
NO_GLOBAL=(--moe-router-load-balancing-type aux_loss seq_aux_loss --moe-aux-loss-coeff 1e-2 2e-2)
moe_fields() { grep ' iteration ' "$1" | grep -o 'lm loss: [^|]*|\|[a-z_]*loss: [^|]*|\|grad norm: [^|]*|'; }
"$MC_BIN" "${MIXED[@]}" "${LOSSES[@]}" --data-cache-path "$MC_TMP/cache" \
    --tensorboard-dir "$MC_TMP/tb" --moe-per-layer-logging >"$MC_TMP/mixed" 2>&1
rc=$?
check "dense layers among MoE layers with every router loss train (rc=$rc $(tail -c 300 "$MC_TMP/mixed"))" \
    test $rc -eq 0
check "the losses are logged in Megatron's names and order ($(grep -m1 ' iteration ' "$MC_TMP/mixed"))" \
    test "$(grep -c ' lm loss: [^|]*| load_balancing_loss: [^|]*| seq_load_balancing_loss: [^|]*| global_load_balancing_loss: [^|]*| z_loss: [^|]*| loss scale' "$MC_TMP/mixed")" -eq 4
TB_PY=${MC_TB_PYTHON:-$(dirname "$0")/../../build/venv-tb/bin/python}
if "$TB_PY" -c 'import tensorboard' 2>/dev/null; then
    "$TB_PY" "$(dirname "$0")/tensorboard_check.py" moe "$MC_TMP/tb" "$MC_TMP/mixed" \
        --moe load_balancing_loss,seq_load_balancing_loss,global_load_balancing_loss,z_loss \
        --moe-layers 4,2 2>"$MC_TMP/tb.err" || echo "not ok - moe: tensorboard_check.py failed: $(tail -c 300 "$MC_TMP/tb.err")"
else
    skip "the MoE losses in TensorBoard" "no tensorboard package at $TB_PY"
fi
moe_fields "$MC_TMP/mixed" >"$MC_TMP/mixed.f"
# --recompute-granularity full: the forward of a recomputed group runs again in the backward;
# its first forward, Megatron's checkpointed forward under no_grad, takes no losses, tracker
# values, expert-bias or dropped counts: with every loss, sigmoid scores with the expert bias and
# token dropping, every line (the dropped counts' too) is the plain run's, bit for bit
RC=("${MIXED[@]}" "${LOSSES[@]}" --moe-router-score-function sigmoid --moe-router-enable-expert-bias
    --moe-expert-capacity-factor 1 --data-cache-path "$MC_TMP/cache")
rc_lines() { grep -o 'lm loss: [^|]*|\|[a-z_]*loss: [^|]*|\|grad norm: [^|]*|\|tokens dropped.*' "$1"; }
"$MC_BIN" "${RC[@]}" >"$MC_TMP/plain" 2>&1
"$MC_BIN" "${RC[@]}" --recompute-granularity full --recompute-method uniform \
    --recompute-num-layers 2 >"$MC_TMP/rc" 2>&1
rc_lines "$MC_TMP/plain" >"$MC_TMP/plain.f"
rc_lines "$MC_TMP/rc" >"$MC_TMP/rc.f"
check "the recomputation's comparison has four dropped-count lines and four z_loss values ($(tail -c 200 "$MC_TMP/plain"))" \
    test "$(grep -c 'tokens dropped' "$MC_TMP/plain.f")" -eq 4 -a "$(grep -c z_loss "$MC_TMP/plain.f")" -eq 4
check "full recomputation of MoE layers gives the plain run's lines and dropped counts bit for bit ($(diff "$MC_TMP/plain.f" "$MC_TMP/rc.f" | head -4 | tr '\n' ' ') $(tail -c 200 "$MC_TMP/rc"))" \
    cmp -s "$MC_TMP/plain.f" "$MC_TMP/rc.f"
# The losses' gradients under the loss scale and the token scaling (coefficients large enough
# that a wrong scale moves every line): --fp16 at a static loss scale is the fp32 run within
# fp16's rounding (the injected gradient is times the loss scale, as MoEAuxLossAutoScaler's);
# dynamic from 2^20 the scaler skips the overflowing iterations, halving the scale, then trains
STRONG=("${FLAGS_NO_LB[@]}" --moe-layer-freq "[1,0,0,1]" --moe-z-loss-coeff 1e-1 --train-iters 4
        --moe-router-load-balancing-type aux_loss seq_aux_loss --moe-aux-loss-coeff 1e-1 2e-1)
"$MC_BIN" "${STRONG[@]}" --data-cache-path "$MC_TMP/cache" >"$MC_TMP/strong" 2>&1
moe_fields "$MC_TMP/strong" >"$MC_TMP/strong.f"
"$MC_BIN" "${STRONG[@]}" --fp16 --loss-scale 512 --data-cache-path "$MC_TMP/cache" >"$MC_TMP/fp16" 2>&1
moe_fields "$MC_TMP/fp16" >"$MC_TMP/fp16.f"
check "--fp16 MoE layers at loss scale 512 give the fp32 lines within fp16's rounding ($(paste -d' ' "$MC_TMP/strong.f" "$MC_TMP/fp16.f" | tail -3 | tr '\n' ' ') $(tail -c 200 "$MC_TMP/fp16"))" \
    same_fields "$MC_TMP/strong.f" "$MC_TMP/fp16.f" 1e-3
"$MC_BIN" "${STRONG[@]}" --fp16 --initial-loss-scale 1048576 --train-iters 5 \
    --data-cache-path "$MC_TMP/cache" >"$MC_TMP/fp16d" 2>&1
scales=$(grep ' iteration ' "$MC_TMP/fp16d" | grep -o 'lm loss: [0-9.E+]*\|loss scale: [0-9.]*' |
    awk '/lm loss/ { printf "trains " } /loss scale/ { printf "%s ", $NF }')
check "--fp16 MoE layers from loss scale 2^20: the overflowing iterations are skipped, halving it, then the rest train ($scales)" \
    test "$scales" = "1048576.0 524288.0 262144.0 trains 262144.0 trains 262144.0 "
# --moe-router-dtype fp32 with --bf16: the router's input and weight cast to float32, its
# logits, scores, top-k, probabilities and losses in float32 beside bf16 activations: the fp32
# run's lines within bf16's rounding, and iteration 1's z_loss (the same weights, bf16-rounded)
# within 1e-4 of the fp32 run's, where the bf16 router's is a bf16 value (some 7e-4 away)
"$MC_BIN" "${STRONG[@]}" --bf16 --moe-router-dtype fp32 --data-cache-path "$MC_TMP/cache" >"$MC_TMP/r32" 2>&1
moe_fields "$MC_TMP/r32" >"$MC_TMP/r32.f"
check "--moe-router-dtype fp32 with --bf16 gives the fp32 lines within bf16's rounding ($(paste -d' ' "$MC_TMP/strong.f" "$MC_TMP/r32.f" | tail -3 | tr '\n' ' ') $(tail -c 200 "$MC_TMP/r32"))" \
    same_fields "$MC_TMP/strong.f" "$MC_TMP/r32.f" 4e-3
z1() { grep -m1 -o 'z_loss: [^ ]*' "$1" | cut -d' ' -f2; }
check "--moe-router-dtype fp32: iteration 1's z_loss is float32's ($(z1 "$MC_TMP/r32.f"), fp32 run $(z1 "$MC_TMP/strong.f"))" \
    awk -v a="$(z1 "$MC_TMP/r32.f")" -v b="$(z1 "$MC_TMP/strong.f")" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d < 1e-4 * b) }'
if have_mpirun; then
    # the float32 probabilities through the dispatcher (all-to-all over ep 2, etp 1; dp 2 for
    # the dense layers), and --calculate-per-token-loss: each loss's gradient times the rank's
    # tokens, the whole gradient over the global batch's tokens (router.py, finalize_model_grads;
    # without it the losses' gradients would be some 1/128 of theirs): with every token counted,
    # the single rank's plain lines within bf16's rounding
    mpirun_mc 2 "${STRONG[@]}" --bf16 --moe-router-dtype fp32 --expert-model-parallel-size 2 \
        --calculate-per-token-loss --data-cache-path "$MC_TMP/cache" >"$MC_TMP/par" 2>&1
    moe_fields "$MC_TMP/par" >"$MC_TMP/par.f"
    check "--moe-router-dtype fp32 with --bf16 and --calculate-per-token-loss at ep 2 (dp 2) give the single rank's plain lines ($(diff "$MC_TMP/r32.f" "$MC_TMP/par.f" | head -4 | tr '\n' ' ') $(tail -c 200 "$MC_TMP/par"))" \
        same_fields "$MC_TMP/r32.f" "$MC_TMP/par.f" 4e-3
    # and through the allgather dispatcher (the probabilities gathered over tp x ep in float32;
    # the same numbers, 1e-5: a 16-bit gather of them moves the lm loss by some 1e-4)
    mpirun_mc 2 "${STRONG[@]}" --bf16 --moe-router-dtype fp32 --expert-model-parallel-size 2 \
        --moe-token-dispatcher-type allgather --data-cache-path "$MC_TMP/cache" >"$MC_TMP/par" 2>&1
    moe_fields "$MC_TMP/par" >"$MC_TMP/par.f"
    check "--moe-router-dtype fp32 with --bf16 at ep 2 with the allgather dispatcher gives the single rank's lines ($(diff "$MC_TMP/r32.f" "$MC_TMP/par.f" | head -4 | tr '\n' ' ') $(tail -c 200 "$MC_TMP/par"))" \
        same_fields "$MC_TMP/r32.f" "$MC_TMP/par.f"
    for layout in "pp 2:--pipeline-model-parallel-size 2" \
        "pp 2 vpp 2:--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1"; do
        name=${layout%%:*}
        # shellcheck disable=SC2086
        mpirun_mc 2 "${MIXED[@]}" "${LOSSES[@]}" --data-cache-path "$MC_TMP/cache" \
            ${layout#*:} >"$MC_TMP/par" 2>&1
        moe_fields "$MC_TMP/par" >"$MC_TMP/par.f"
        check "mixed layers and every loss at $name give the single rank's lines ($(tail -c 300 "$MC_TMP/par" | tr '\n' ' '))" \
            same_fields "$MC_TMP/mixed.f" "$MC_TMP/par.f"
    done
    "$MC_BIN" "${MIXED[@]}" "${NO_GLOBAL[@]}" --data-cache-path "$MC_TMP/cache" >"$MC_TMP/one" 2>&1
    moe_fields "$MC_TMP/one" >"$MC_TMP/one.f"
    mpirun_mc 2 "${MIXED[@]}" "${NO_GLOBAL[@]}" --data-cache-path "$MC_TMP/cache" >"$MC_TMP/par" 2>&1
    moe_fields "$MC_TMP/par" >"$MC_TMP/par.f"
    check "mixed layers, aux, seq-aux and z losses at dp 2 give the single rank's lines ($(tail -c 300 "$MC_TMP/par" | tr '\n' ' '))" \
        same_fields "$MC_TMP/one.f" "$MC_TMP/par.f"
    check "the dp 2 comparison has its four losses" test "$(grep -c 'z_loss' "$MC_TMP/one.f")" -eq 4
    # --bf16: the router, its losses and the experts in bf16 (the z-loss's tensors too), float32
    # main gradients; dp 2 is the single rank's run within bf16's rounding (the distributed
    # optimizer's float32 sums in another order can move a bf16 value by its last bit)
    "$MC_BIN" "${MIXED[@]}" "${NO_GLOBAL[@]}" --bf16 --data-cache-path "$MC_TMP/cache" >"$MC_TMP/bf16" 2>&1
    moe_fields "$MC_TMP/bf16" >"$MC_TMP/bf16.f"
    mpirun_mc 2 "${MIXED[@]}" "${NO_GLOBAL[@]}" --bf16 --data-cache-path "$MC_TMP/cache" >"$MC_TMP/par" 2>&1
    moe_fields "$MC_TMP/par" >"$MC_TMP/par.f"
    check "--bf16 MoE layers at dp 2 give the single rank's lines ($(tail -c 300 "$MC_TMP/par" | tr '\n' ' '))" \
        same_fields "$MC_TMP/bf16.f" "$MC_TMP/par.f" 4e-3
    check "the bf16 run differs from the fp32 one" test "$(head -1 "$MC_TMP/bf16.f")" != "$(head -1 "$MC_TMP/one.f")"
    # the z-loss at tp 2 + SP: each rank's coefficient over tp (its mean is over its own sequence
    # rows, the router's gradient sums over tp): the single rank's lm loss, load-balancing losses
    # and grad norms; the z_loss logged is the last rank's own rows' (Megatron's tracker has no
    # reduce group for it), not the single rank's
    mpirun_mc 2 "${STRONG[@]}" --tensor-model-parallel-size 2 --sequence-parallel \
        --data-cache-path "$MC_TMP/cache" >"$MC_TMP/par" 2>&1
    moe_fields "$MC_TMP/par" >"$MC_TMP/par.f"
    grep -v z_loss "$MC_TMP/strong.f" >"$MC_TMP/strong.noz"
    grep -v z_loss "$MC_TMP/par.f" >"$MC_TMP/par.noz"
    check "the z-loss at tp 2 + SP gives the single rank's lm loss, load-balancing losses and grad norms ($(diff "$MC_TMP/strong.f" "$MC_TMP/par.f" | head -4 | tr '\n' ' ') $(tail -c 200 "$MC_TMP/par"))" \
        same_fields "$MC_TMP/strong.noz" "$MC_TMP/par.noz"
    check "the z_loss at tp 2 is one rank's own ($(grep -m1 z_loss "$MC_TMP/par.f"), single rank $(grep -m1 z_loss "$MC_TMP/strong.f"))" \
        test "$(grep -c z_loss "$MC_TMP/par.f")" -eq 4 -a "$(grep -m1 z_loss "$MC_TMP/par.f")" != "$(grep -m1 z_loss "$MC_TMP/strong.f")"
else
    skip "mixed layers and the router losses at pp 2 and dp 2" "no mpirun"
fi

# the CUDA backend on the emulated device (test/emu): the same line
EMU_BIN=${MC_EMU_BUILD:-}/megatron-c
if [ -n "${MC_EMU_BUILD:-}" ] && [ -x "$EMU_BIN" ]; then
    "$EMU_BIN" "${FLAGS[@]}" --device cuda --data-cache-path "$MC_TMP/cache" --load "$REF/ep1" \
        --no-load-optim --no-load-rng --exit-interval 6 >"$MC_TMP/emu" 2>&1
    fields "$MC_TMP/emu" >"$MC_TMP/emu.f"
    check "on the emulated GPU (--device cuda) iteration 6 is Megatron's too ($(tr '\n' ' ' <"$MC_TMP/emu.f"))" \
        cmp -s "$MC_TMP/want" "$MC_TMP/emu.f"
    # the losses' ops on the device (the z-loss's, seq_aux_loss's per sequence), mixed layers:
    # the CPU's first two iterations (six fields each)
    "$EMU_BIN" "${MIXED[@]}" "${LOSSES[@]}" --device cuda --data-cache-path "$MC_TMP/cache" \
        --exit-interval 2 >"$MC_TMP/emu-mixed" 2>&1
    moe_fields "$MC_TMP/emu-mixed" >"$MC_TMP/emu-mixed.f"
    head -n 12 "$MC_TMP/mixed.f" >"$MC_TMP/mixed2.f"
    check "on the emulated GPU mixed layers and every loss give the CPU's lines ($(tail -c 300 "$MC_TMP/emu-mixed" | tr '\n' ' '))" \
        same_fields "$MC_TMP/mixed2.f" "$MC_TMP/emu-mixed.f"
    # in bf16 the device's GEMMs round otherwise (as a dense bf16 model's): bf16's tolerance
    if [ -s "$MC_TMP/bf16.f" ]; then
        "$EMU_BIN" "${MIXED[@]}" "${NO_GLOBAL[@]}" --bf16 --device cuda --exit-interval 2 \
            --data-cache-path "$MC_TMP/cache" >"$MC_TMP/emu-bf16" 2>&1
        moe_fields "$MC_TMP/emu-bf16" >"$MC_TMP/emu-bf16.f"
        head -n 10 "$MC_TMP/bf16.f" >"$MC_TMP/bf16-2.f"
        check "on the emulated GPU --bf16 MoE layers give the CPU's lines within bf16's rounding ($(tail -c 300 "$MC_TMP/emu-bf16" | tr '\n' ' '))" \
            same_fields "$MC_TMP/bf16-2.f" "$MC_TMP/emu-bf16.f" 4e-3
    fi
else
    skip "the MoE layer on the emulated GPU" "no build/emu/megatron-c (make EMU=1)"
fi

