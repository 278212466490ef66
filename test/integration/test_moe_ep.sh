#!/usr/bin/env bash
# Expert parallelism (model/moe.c's alltoall dispatcher, model/moe_allgather.c's allgather one,
# parallel/grads.c's expert buckets, the
# distributed optimizer's expert shards over edp, the norms' expert part): a tiny MoE model (2
# layers x 4 experts, top-2, aux_loss, dropout on) at ep 2 on 2 ranks, ep 2 x edp 2 on 4 ranks
# (with overlapped reduction averaged in the collective), ep 4 on 4 ranks, both with the
# distributed optimizer, tensor parallelism with sequence parallelism and parallel folding (tp 2
# x ep 2 with etp 2 on 4 ranks; tp 2 with etp 2 on 2; tp 2 with etp 1, its experts' gradients
# over edp 2, with the distributed optimizer), and ep 2 x pp 2 x vpp 2 on 4 ranks give the single rank's lm loss,
# load_balancing_loss, grad norm and params norm within 1e-5 relative over 12 iterations
# (test_cli_moe has what expert parallelism refuses by name); tp 2 + SP x ep 2 in bf16 within
# bf16's rounding; the three load-balancing losses at once at tp 2 + SP, etp 1 x ep 2 (1e-5); the
# shared expert (--moe-shared-expert-intermediate-size, its gate; overlapped: the same numbers)
# at tp 2 + SP x ep 2, dp 2; tp 2 + SP x ep 2 with the shared expert on the emulated GPU (CUDA
# backend, MPI staging) gives the first 4; token dropping at ep 2, padded to capacity, gives the
# single rank's numbers and dropped counts, and on the emulated GPU the first 2; the allgather
# dispatcher (model/moe_allgather.c, Megatron's default) at ep 2 and at tp 2 + SP x ep 2 gives
# the single rank's numbers (1e-5), at ep 2 on the emulated GPU the first 2.
# ci-sanitize: the dispatcher's all-to-all under mpirun, expert buckets over edp
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

# (--make-vocab-size-divisible-by 64: the padded vocabulary of tp 2 is the single rank's)
FLAGS=(--device cpu --mock-data --vocab-size 128 --make-vocab-size-divisible-by 64 --num-layers 2 --hidden-size 32
       --num-attention-heads 4 --ffn-hidden-size 64 --seq-length 32 --max-position-embeddings 32
       --position-embedding-type rope --normalization RMSNorm --swiglu
       --untie-embeddings-and-output-weights --disable-bias-linear --num-experts 4
       --moe-ffn-hidden-size 16 --moe-router-topk 2 --moe-router-load-balancing-type aux_loss
       --moe-aux-loss-coeff 1e-2 --moe-token-dispatcher-type alltoall --micro-batch-size 2
       --global-batch-size 8 --train-iters 12 --lr 3e-3 --lr-decay-style cosine
       --lr-warmup-iters 3 --lr-decay-iters 12 --min-lr 1e-4 --weight-decay 0.1 --clip-grad 1.0 --log-interval 1
       --log-params-norm --eval-iters 0 --eval-interval 1000 --seed 1234 --hidden-dropout 0.1
       --attention-dropout 0.1)

# each iteration's lm loss, load_balancing_loss, grad norm and params norm, one line
numbers() {
    sed -nE 's/.* iteration +([0-9]+)\/.*\| lm loss: ([0-9.E+-]+) \| load_balancing_loss: ([0-9.E+-]+) \|.*grad norm: ([0-9.]+) \| params norm: ([0-9.]+) \|.*/\1 \2 \3 \4 \5/p' "$1"
}
# same REF RUN [N [TOL]]: RUN's N (12) iterations are REF's first N, every number within TOL
# (1e-5) relative
same() {
    local n=${3:-12}
    paste -d' ' <(numbers "$1" | head -n "$n") <(numbers "$2") | awk -v want="$n" -v tol="${4:-1e-5}" '
        function rel(a, b) { d = a - b; if (d < 0) d = -d; m = (a < 0 ? -a : a); return m > 0 ? d / m : d }
        NF != 10 || $1 != $6 { bad++; next }
        { n++; for (i = 2; i <= 5; i++) if (rel($i, $(i + 5)) > tol) bad++ }
        END { exit !(n == want && bad == 0) }'
}

"$MC_BIN" "${FLAGS[@]}" >"$MC_TMP/single" 2>&1
check "the single-rank MoE run (exit 0; $(tail -c 200 "$MC_TMP/single" | tr '\n' ' '))" test $? -eq 0
check "it logs 12 iterations with load_balancing_loss and both norms" \
    test "$(numbers "$MC_TMP/single" | wc -l)" -eq 12

# the shared expert (SharedExpertMLP, its output added to the routed one): with its sigmoid gate
# run before the router or, overlapped, after it, the same numbers (Megatron's differ only in the
# order of the input gradient's sum); the gate changes them (test_moe_block has its arithmetic).
# --init-method-std 0.1: a gate that weighs enough for a wrong gradient of it (not summed over
# tp) to show within 12 iterations
# The sanitizer pass leaves these runs to the release one: test_moe_block runs the shared
# expert's code (model/moe_shared.c, the MLP's) under it.
SHX=(--init-method-std 0.1 --moe-shared-expert-intermediate-size 24 --moe-shared-expert-gate)
if in_sanitizer_build; then
    skip "the shared expert's runs" "the release build's run checks them (sanitizer build)"
else
    "$MC_BIN" "${FLAGS[@]}" "${SHX[@]}" --moe-shared-expert-overlap >"$MC_TMP/shx" 2>&1
    "$MC_BIN" "${FLAGS[@]}" "${SHX[@]}" >"$MC_TMP/shx-before" 2>&1
    "$MC_BIN" "${FLAGS[@]}" "${SHX[@]:0:4}" >"$MC_TMP/shx-nogate" 2>&1
    check "the shared expert with its gate runs 12 iterations ($(grep -h 'error:' "$MC_TMP/shx" | head -c 200))" \
        test "$(numbers "$MC_TMP/shx" | wc -l)" -eq 12
    check "--moe-shared-expert-overlap keeps the numbers" \
        cmp -s <(numbers "$MC_TMP/shx") <(numbers "$MC_TMP/shx-before")
    differ() { [ "$(numbers "$1" | wc -l)" -eq 12 ] && [ "$(numbers "$2" | wc -l)" -eq 12 ] && ! same "$1" "$2"; }
    check "--moe-shared-expert-gate changes them" differ "$MC_TMP/shx" "$MC_TMP/shx-nogate"
fi

if have_mpirun; then
    # (the sanitizer pass runs the allgather dispatcher at ep 2 only: the same code as tp 2 x ep 2)
    AG_TP="the allgather dispatcher at tp 2 + SP x ep 2 (etp 2):4:--tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 2 --moe-token-dispatcher-type allgather"
    left_to_release "the allgather dispatcher at tp 2 + SP x ep 2" && AG_TP=
    for layout in "ep 2:2:--expert-model-parallel-size 2" \
        "ep 2 x edp 2 (overlapped, averaged in the collective):4:--expert-model-parallel-size 2 --overlap-grad-reduce --ddp-bucket-size 2000 --ddp-average-in-collective" \
        "ep 4:4:--expert-model-parallel-size 4" \
        "ep 2 with the distributed optimizer:2:--expert-model-parallel-size 2 --use-distributed-optimizer" \
        "ep 2 x edp 2 with the distributed optimizer (overlapped reduction and gather):4:--expert-model-parallel-size 2 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 2000" \
        "tp 2 + SP x ep 2 (etp 2, Megatron's default):4:--tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 2" \
        "tp 2 + SP (etp 2, ep 1):2:--tensor-model-parallel-size 2 --sequence-parallel" \
        "tp 2 + SP with etp 1 (edp 2) and the distributed optimizer (overlapped):2:--tensor-model-parallel-size 2 --sequence-parallel --expert-tensor-parallel-size 1 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather" \
        "the allgather dispatcher at ep 2:2:--expert-model-parallel-size 2 --moe-token-dispatcher-type allgather" \
        ${AG_TP:+"$AG_TP"}; do
        name=${layout%%:*}
        rest=${layout#*:}
        np=${rest%%:*}
        # shellcheck disable=SC2086
        mpirun_mc "$np" "${FLAGS[@]}" ${rest#*:} >"$MC_TMP/ep" 2>&1
        rc=$?
        check "$name on $np ranks exits 0 (rc=$rc: $(tail -c 300 "$MC_TMP/ep" | tr '\n' ' '))" test $rc -eq 0
        check "$name gives the single rank's lm loss, load_balancing_loss, grad and params norms" \
            same "$MC_TMP/single" "$MC_TMP/ep"
    done
    # with pipeline parallelism and interleaving: 4 layers, pp 2 x vpp 2, ep 2 (the ep group
    # within each stage)
    "$MC_BIN" "${FLAGS[@]}" --num-layers 4 >"$MC_TMP/single4" 2>&1
    mpirun_mc 4 "${FLAGS[@]}" --num-layers 4 --expert-model-parallel-size 2 \
        --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1 >"$MC_TMP/ep" 2>&1
    rc=$?
    check "ep 2 x pp 2 x vpp 2 on 4 ranks exits 0 (rc=$rc: $(tail -c 300 "$MC_TMP/ep" | tr '\n' ' '))" test $rc -eq 0
    check "ep 2 x pp 2 x vpp 2 gives the single rank's lm loss, load_balancing_loss, grad and params norms" \
        same "$MC_TMP/single4" "$MC_TMP/ep"
    # --bf16 at tp 2 + SP x ep 2: the tokens travel in bf16, the sums of the experts' weight
    # gradients (float32 main grads) run over both ranks' rows in one GEMM, the etp partial sums
    # add in bf16 (Megatron's reduce-scatter in the probs' type): bf16's tolerance, as test_moe's
    # dp 2
    "$MC_BIN" "${FLAGS[@]}" --bf16 >"$MC_TMP/bf16" 2>&1
    mpirun_mc 4 "${FLAGS[@]}" --bf16 --tensor-model-parallel-size 2 --sequence-parallel \
        --expert-model-parallel-size 2 >"$MC_TMP/ep" 2>&1
    check "tp 2 + SP x ep 2 in bf16 gives the single rank's bf16 numbers within 4e-3 ($(tail -c 300 "$MC_TMP/ep" | tr '\n' ' '))" \
        same "$MC_TMP/bf16" "$MC_TMP/ep" 12 4e-3
    # the three load-balancing losses at once (aux_loss's and seq_aux_loss's counts summed over
    # tp, global_aux_loss's over tp x dp x cp, each logged as Megatron reduces it) at tp 2 + SP
    # with etp 1 x ep 2 on 2 ranks (the ep group is the tp group; dp 1: global_aux_loss's running
    # counts depend on dp, as Megatron's): the single rank's lm loss, each loss and the grad norm
    # over 8 iterations (1e-5)
    LB=(--moe-router-load-balancing-type aux_loss seq_aux_loss global_aux_loss
        --moe-aux-loss-coeff 1e-2 1e-3 1e-4 --train-iters 8)
    lb_fields() { grep -o 'lm loss: [^|]*|\|[a-z_]*load_balancing_loss: [^|]*|\|grad norm: [^|]*|' "$1"; }
    lb_same() {
        [ "$(wc -l <"$1")" -eq 40 ] && [ "$(wc -l <"$2")" -eq 40 ] &&
            paste -d: "$1" "$2" | awk -F: '{ d = $2 - $4; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2
                if ($1 != $3 || d > 1e-5 * m) bad++ } END { exit bad > 0 }'
    }
    "$MC_BIN" "${FLAGS[@]}" "${LB[@]}" >"$MC_TMP/lb1" 2>&1
    mpirun_mc 2 "${FLAGS[@]}" "${LB[@]}" --tensor-model-parallel-size 2 --sequence-parallel \
        --expert-tensor-parallel-size 1 --expert-model-parallel-size 2 >"$MC_TMP/lb4" 2>&1
    lb_fields "$MC_TMP/lb1" | sed 's/ *|$//' >"$MC_TMP/lb1.f"
    lb_fields "$MC_TMP/lb4" | sed 's/ *|$//' >"$MC_TMP/lb4.f"
    check "aux_loss, seq_aux_loss and global_aux_loss at tp 2 + SP, etp 1 x ep 2 give the single rank's losses and grad norms ($(diff "$MC_TMP/lb1.f" "$MC_TMP/lb4.f" | head -4 | tr '\n' ' ') $(grep -h 'error:' "$MC_TMP/lb4" | head -c 300))" \
        lb_same "$MC_TMP/lb1.f" "$MC_TMP/lb4.f"
    # token dropping (--moe-expert-capacity-factor 1: some 5% of the (token, expert) assignments
    # dropped here): Megatron's capacity is each expert's share of the tokens of the rank's
    # microbatch, so ep 2 (dp 2: each rank's microbatches are the single rank's) drops what the
    # single rank drops: its numbers over 8 iterations, padded to capacity (rows of probability 0,
    # which change the GEMMs' shapes, not the numbers) or not, and the same dropped counts in the
    # line after each log line. (tp 2 + SP routes each rank's half of the sequence: other drops,
    # as in Megatron.)
    CAP=(--moe-expert-capacity-factor 1.0 --train-iters 8)
    dropped() { sed -nE 's/^ \[MoE\] tokens dropped for capacity since the last log: ([0-9]+) of ([0-9]+) .*/\1 \2/p' "$1"; }
    if in_sanitizer_build; then
        # the sanitizer pass sees the capacity op and the padded layer in test_kernels_moe and
        # test_moe_block
        skip "token dropping at ep 2 against the single rank" "the release build's run checks it (sanitizer build)"
    else
        "$MC_BIN" "${FLAGS[@]}" "${CAP[@]}" >"$MC_TMP/cap1" 2>&1
        mpirun_mc 2 "${FLAGS[@]}" "${CAP[@]}" --moe-pad-expert-input-to-capacity \
            --expert-model-parallel-size 2 >"$MC_TMP/cap2" 2>&1
        check "ep 2 padded to capacity gives the single rank's numbers with token dropping ($(tail -c 300 "$MC_TMP/cap2" | tr '\n' ' '))" \
            same "$MC_TMP/cap1" "$MC_TMP/cap2" 8
        check "both log the same dropped tokens, some at every iteration ($(dropped "$MC_TMP/cap1" | head -2 | tr '\n' ' '))" \
            bash -c '[ "$(grep -c " 1024$" <<<"$1")" -eq 8 ] && ! grep -q "^0 " <<<"$1" && [ "$1" = "$2" ]' _ \
            "$(dropped "$MC_TMP/cap1")" "$(dropped "$MC_TMP/cap2")"
        if same "$MC_TMP/single" "$MC_TMP/cap1" 8; then
            not_ok "dropping tokens changes the numbers"
        else
            ok "dropping tokens changes the numbers"
        fi
    fi
    # the shared expert (gate, overlapped) at tp 2 + SP x ep 2 with dp 2 (its tensors dense ones:
    # split over tp, reduced and sharded over dp; the gate's gradient summed over tp)
    if ! in_sanitizer_build; then
        mpirun_mc 4 "${FLAGS[@]}" "${SHX[@]}" --moe-shared-expert-overlap \
            --tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 2 \
            --use-distributed-optimizer >"$MC_TMP/ep" 2>&1
        check "the shared expert at tp 2 + SP x ep 2 (dp 2, distributed optimizer) gives the single rank's numbers ($(tail -c 300 "$MC_TMP/ep" | tr '\n' ' '))" \
            same "$MC_TMP/shx" "$MC_TMP/ep"
    fi
    # the comparison can fail: another seed is another run
    mpirun_mc 2 "${FLAGS[@]}" --expert-model-parallel-size 2 --seed 4321 >"$MC_TMP/other" 2>&1
    if same "$MC_TMP/single" "$MC_TMP/other"; then
        not_ok "the comparison can fail (another seed)"
    else
        ok "the comparison can fail (another seed)"
    fi
    # the CUDA backend on the emulated device (test/emu), device buffers staged through MPI: 4
    # iterations (the same schedule) of tp 2 + SP x ep 2 (the all-to-all over ep and the
    # all-gather and reduce-scatter over etp), with the gated shared expert
    EMU_BIN=${MC_EMU_BUILD:-}/megatron-c
    if [[ ${MC_EMU_BUILD:-} == *-san ]]; then
        # four emulated ranks under ASan are this script's longest run: the sanitizer pass sees
        # the MoE kernels in san/emu-forward/test_gpu_moe and the staging under mpirun in
        # test_cuda_emu's dp run; the release pass runs this one
        skip "tp 2 + SP x ep 2 on the emulated GPU" "the release build's run checks it (sanitizer build)"
    elif [ -n "${MC_EMU_BUILD:-}" ] && [ -x "$EMU_BIN" ]; then
        "${MPIRUN[@]}" -np 4 "$EMU_BIN" "${FLAGS[@]}" "${SHX[@]}" --moe-shared-expert-overlap \
            --device cuda --distributed-backend mpi --tensor-model-parallel-size 2 \
            --sequence-parallel --expert-model-parallel-size 2 --train-iters 4 >"$MC_TMP/emu" 2>&1
        check "tp 2 + SP x ep 2 with the shared expert on the emulated GPU (--device cuda) gives the single rank's first 4 iterations ($(tail -c 300 "$MC_TMP/emu" | tr '\n' ' '))" \
            same "$MC_TMP/shx" "$MC_TMP/emu" 4
        # token dropping on the device (the capacity kernel, padded, the kept count): the CPU's
        # first 2 iterations and dropped counts
        "$EMU_BIN" "${FLAGS[@]}" "${CAP[@]}" --device cuda --moe-pad-expert-input-to-capacity \
            --train-iters 2 >"$MC_TMP/emu_cap" 2>&1
        check "token dropping padded to capacity on the emulated GPU gives the CPU's first 2 iterations and dropped counts ($(tail -c 300 "$MC_TMP/emu_cap" | tr '\n' ' '))" \
            bash -c '[ "$1" = "$2" ] && [ -n "$1" ]' _ "$(dropped "$MC_TMP/cap1" | head -2)" \
            "$(dropped "$MC_TMP/emu_cap")"
        check "token dropping padded to capacity on the emulated GPU: the numbers" same "$MC_TMP/cap1" "$MC_TMP/emu_cap" 2
        # the allgather dispatcher on the device (the map through the host, tokens and probs
        # gathered and reduce-scattered over tp_ep in device buffers staged through MPI): ep 2's
        # first 2 iterations
        "${MPIRUN[@]}" -np 2 "$EMU_BIN" "${FLAGS[@]}" --device cuda --distributed-backend mpi \
            --expert-model-parallel-size 2 --moe-token-dispatcher-type allgather --train-iters 2 \
            >"$MC_TMP/emu_ag" 2>&1
        check "the allgather dispatcher at ep 2 on the emulated GPU gives the single rank's first 2 iterations ($(tail -c 300 "$MC_TMP/emu_ag" | tr '\n' ' '))" \
            same "$MC_TMP/single" "$MC_TMP/emu_ag" 2
    else
        skip "tp 2 + SP x ep 2 on the emulated GPU" "no build/emu/megatron-c (make EMU=1)"
    fi
else
    skip "expert parallelism under mpirun" "no mpirun"
fi

