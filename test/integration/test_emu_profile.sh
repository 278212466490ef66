#!/usr/bin/env bash
# The device work of one bf16 training step of GPT with dropout 0 and the default backend, read
# from the emulated device's list of everything issued (MC_EMU_PROFILE=PATH, test/emu/README.md):
# what issue 29 took out of a step stays out. --profile's capture range (cudaProfilerStart/Stop)
# cuts out iteration 3 (after the first iteration's GEMM timing); 2 layers, M = 4 microbatches:
#  - one cross-entropy kernel per microbatch (ce_fused: loss and gradient in one pass), none of the
#    separate ones;
#  - the linear layers' bias gradients from their weight-gradient GEMMs (cuBLASLt's BGRADB, 4 per
#    layer and microbatch): the only column-sum kernels left are LayerNorm's dw/db (2 per layer and
#    the final norm, per microbatch);
#  - the gradient norm in at most two reduction launches, no per-tensor reduction;
#  - dropout 0: no dropout kernel, no device-to-device copy;
#  - host copies only from and to pinned memory: the tokens in, the losses and the norm out (one
#    read per microbatch's losses, without a wait, and one for the norm).
#  - none of the project's own attention kernels (att_*): the default backend is cuDNN's fused
#    attention, one execution plan run per layer and microbatch forward and one backward.
# About 20 s on a shared 2-core machine.
source "$(dirname "$0")/lib.sh"

if [ -z "${MC_EMU_BUILD:-}" ] || [ ! -x "$MC_EMU_BUILD/megatron-c" ]; then
    skip "the device work of a bf16 step on the emulated device" "no emulated build (make emu)"
    exit 0
fi
M=4 L=2
start=$(date +%s)
MC_EMU_PROFILE="$MC_TMP/list" "$MC_EMU_BUILD/megatron-c" --device cuda --mock-data --vocab-size 256 \
    --make-vocab-size-divisible-by 64 --num-layers $L --hidden-size 64 --num-attention-heads 4 \
    --seq-length 32 --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size $((2 * M)) \
    --train-iters 3 --lr 3e-3 --log-interval 1 --eval-iters 0 --seed 1234 --bf16 --hidden-dropout 0 \
    --attention-dropout 0 --clip-grad 1.0 --profile --profile-step-start 2 --profile-step-end 3 \
    >"$MC_TMP/log" 2>&1
rc=$?
sed -n '/^cudaProfilerStart$/,/^cudaProfilerStop$/p' "$MC_TMP/list" >"$MC_TMP/step"
check "a bf16 step with dropout 0 on the emulated device, its work listed (rc=$rc, $(wc -l <"$MC_TMP/step") items, $(($(date +%s) - start)) s)" \
    bash -c "[ $rc -eq 0 ] && [ \$(grep -c 'cudaProfiler' '$MC_TMP/step') -eq 2 ]"
[ $rc -eq 0 ] || sed 's/^/# /' "$MC_TMP/log" | tail -20

# n PATTERN: how many items of the step match PATTERN (grep -E)
n() { grep -cE -- "$1" "$MC_TMP/step"; }
counts() { # the step's items by name, sizes dropped, for the log when a check fails
    sed -E 's/ [0-9]+( pinned| pageable)?$/ N\1/' "$MC_TMP/step" | sort | uniq -c | sort -rn | sed 's/^/#/'
}

ce=$(n '^k_ce_fused') sep=$(n '^k_ce_(max|sums|loss|backward)')
check "one cross-entropy kernel per microbatch: $ce ce_fused for $M microbatches, $sep of the separate ones" \
    test "$ce" -eq $M -a "$sep" -eq 0
bgrad=$(n '^cublasLtMatmul BGRADB$') colsum=$(n '^k_colsum_') lnbw=$(n '^k_ln_backward_dx')
check "bias gradients by the weight-gradient GEMMs: $bgrad BGRADB (want $((4 * L * M))), $colsum column-sum kernels (want LayerNorm's $((lnbw)))" \
    test "$bgrad" -eq $((4 * L * M)) -a "$colsum" -eq "$lnbw" -a "$lnbw" -eq $(((2 * L + 1) * M))
multi=$(n '^k_reduce_multi_') single=$(n '^k_reduce_(partial|final)')
check "the gradient norm: $multi reduction launches (at most 2), $single per-tensor ones" \
    test "$multi" -ge 1 -a "$multi" -le 2 -a "$single" -eq 0
drop=$(n '^k_dropout') d2d=$(n '^cudaMemcpyAsync DeviceToDevice')
check "dropout 0 costs nothing: $drop dropout kernels, $d2d device-to-device copies" test "$drop" -eq 0 -a "$d2d" -eq 0
h2d=$(n '^cudaMemcpyAsync HostToDevice .* pinned$') d2h=$(n '^cudaMemcpyAsync DeviceToHost .* pinned$')
pageable=$(n ' pageable$')
check "host copies from pinned memory: $h2d in (4 per microbatch at least), $d2h out (at most $((M + 1))), $pageable pageable" \
    test "$h2d" -ge $((4 * M)) -a "$d2h" -ge 1 -a "$d2h" -le $((M + 1)) -a "$pageable" -eq 0
att=$(n '^att_') dnn=$(n '^cudnnBackendExecute$')
check "the attention on cuDNN: $dnn execution plan runs (want $((2 * L * M)): a forward and a backward per layer and microbatch), $att launches of the project's attention kernels (att_*)" \
    test "$att" -eq 0 -a "$dnn" -eq $((2 * L * M))
counts | head -40 # the step's work, for the log
