#!/usr/bin/env bash
# --num-distributed-optimizer-instances and --grad-reduce-in-bf16 (issue 33), on a tiny model:
#  - dp 4 with 2 instances (and dp 2 with 2, one rank per instance) gives the single-rank losses,
#    grad and params norms; the gradients are reduce-scattered within an instance and all-reduced
#    across instances (the comm layer's counts per group, --timing-log-level 1);
#  - checkpoints, legacy and torch_dist, written with 2 instances load with 1 and the other way,
#    and training goes on with the numbers of the run that did not stop;
#  - --bf16 --grad-reduce-in-bf16 at dp 2: a bf16 gradient buffer whose all-reduce moves half the
#    bytes of the fp32 one, numbers within bf16's tolerance of the fp32 reduction, yet not equal;
#  - bf16 with 2 instances: the params norm is Megatron's (its sharded main params summed over
#    the whole dp-cp group: sqrt(2) times the norm), the rest as with one instance;
#  - an MoE model with expert parallelism 2 at dp 4 with 2 instances: the single-rank numbers.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

if ! have_mpirun; then
    skip "distributed optimizer instances" "mpirun is not installed (scripts/install-deps.sh installs OpenMPI)"
    exit 0
fi

FLAGS=(--device cpu --mock-data --vocab-size 256 --num-layers 2 --hidden-size 32
       --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32 --micro-batch-size 1
       --global-batch-size 8 --train-iters 8 --lr 3e-3 --lr-decay-style cosine --lr-warmup-iters 2
       --min-lr 1e-4 --weight-decay 0.1 --clip-grad 1.0 --log-interval 1 --eval-iters 0
       --seed 1234 --hidden-dropout 0.1 --attention-dropout 0.1 --log-params-norm
       --use-distributed-optimizer --save-interval 4)
run_np() { # np args...
    local np=$1
    shift
    if [ "$np" -eq 1 ]; then "$MC_BIN" "${FLAGS[@]}" "$@"; else mpirun_mc "$np" "${FLAGS[@]}" "$@"; fi
}
# Iterations 5..8 after a load at 4, without timestamps and times (a resumed run's second line
# also counts its first iteration, so iteration 6 is left out).
resumed() {
    sed -nE '/iteration +(5|7|8)\/ +8 \|/{s/^ \[[^]]*\]//; s/ elapsed time per iteration \(ms\): [0-9.]+ \|//; p}' "$1"
}

# the single-rank references, one saving each checkpoint format
run_np 1 --save "$MC_TMP/ref-legacy" >"$MC_TMP/ref" 2>&1
check "single-rank reference (legacy save)" grep -q 'iteration        8/       8' "$MC_TMP/ref"
run_np 1 --save "$MC_TMP/ref-dist" --ckpt-format torch_dist >"$MC_TMP/ref2" 2>&1
check "single-rank reference (torch_dist save)" same_log_numbers "$MC_TMP/ref" "$MC_TMP/ref2" 8

# ---- the same numbers ----
I2=(--num-distributed-optimizer-instances 2)
BUCKETS=(--overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 2000)
run_np 4 "${I2[@]}" "${BUCKETS[@]}" --ddp-average-in-collective --timing-log-level 1 --save "$MC_TMP/i2-legacy" \
    >"$MC_TMP/i2" 2>"$MC_TMP/i2.err"
check "dp 4, 2 instances (overlapped, buckets, averaging in the collective) gives the single-rank numbers" \
    same_log_numbers "$MC_TMP/ref" "$MC_TMP/i2" 8
check "dp 4, 2 instances: reduce-scatter and all-gather within the instance of 2, all-reduce across instances, no dp-cp reduce-scatter" \
    bash -c "grep -q 'intra-dp-cp reduce-scatter' '$MC_TMP/i2' && grep -q 'intra-dp-cp all-gather' '$MC_TMP/i2' &&
             grep -q 'inter-dist-opt all-reduce' '$MC_TMP/i2' && ! grep -qE '^ +dp-cp reduce-scatter' '$MC_TMP/i2'"
check "dp 4, 2 instances: the memory plan's optimizer shard is 1/2" \
    grep -q 'optimizer state (Adam m, v; 1/2 shard)' "$MC_TMP/i2"
check "dp 4, 2 instances: one distrib_optim.pt (the first instance writes)" \
    bash -c "[ -f '$MC_TMP/i2-legacy/iter_0000004/mp_rank_00/distrib_optim.pt' ] &&
             [ \"\$(ls '$MC_TMP/i2-legacy/iter_0000004')\" = mp_rank_00 ]"
run_np 2 "${I2[@]}" --save "$MC_TMP/i2dp2-dist" --ckpt-format torch_dist >"$MC_TMP/i2dp2" 2>"$MC_TMP/i2dp2.err"
check "dp 2, 2 instances of one rank gives the single-rank numbers" \
    same_log_numbers "$MC_TMP/ref" "$MC_TMP/i2dp2" 8

# ---- checkpoints across instance counts ----
# load_case NAME NP DIR FLAGS...: loads DIR at iteration 4; iterations 5..8 equal the reference's
load_case() {
    local name=$1 np=$2 dir=$3
    shift 3
    run_np "$np" "$@" --load "$dir" --ckpt-step 4 >"$MC_TMP/$name" 2>&1
    local rc=$?
    resumed "$MC_TMP/ref" >"$MC_TMP/want"
    resumed "$MC_TMP/$name" >"$MC_TMP/got"
    if [ $rc -eq 0 ] && [ "$(wc -l <"$MC_TMP/got")" -eq 3 ] &&
        same_lines_float32_loss "$MC_TMP/want" "$MC_TMP/got"; then
        ok "$name: iterations 5..8 equal the run that did not stop"
    else
        not_ok "$name (rc=$rc): $(grep -h error "$MC_TMP/$name" | head -c 400)"
    fi
}
load_case "legacy, 2 instances at dp 4 -> 1 instance at dp 4" 4 "$MC_TMP/i2-legacy" "${BUCKETS[@]}"
load_case "legacy, 1 instance (dp 1) -> 2 instances at dp 2" 2 "$MC_TMP/ref-legacy" "${I2[@]}"
load_case "torch_dist, 2 instances at dp 2 -> dp 1" 1 "$MC_TMP/i2dp2-dist"
load_case "torch_dist, 1 instance (dp 1) -> 2 instances at dp 4" 4 "$MC_TMP/ref-dist" "${I2[@]}"

# ---- --grad-reduce-in-bf16 ----
B=(--bf16 --timing-log-level 1 --micro-batch-size 2)
run_np 2 "${B[@]}" >"$MC_TMP/bf16-fp32red" 2>&1
run_np 2 "${B[@]}" --grad-reduce-in-bf16 >"$MC_TMP/bf16-bf16red" 2>&1
# the gradients' reduce-scatter over dp-cp: MB per iteration
rs_mb() { sed -nE 's/^ +dp-cp reduce-scatter .*: \([0-9.]+, ([0-9.]+)\)/\1/p' "$1" | tail -1; }
f32=$(rs_mb "$MC_TMP/bf16-fp32red") b16=$(rs_mb "$MC_TMP/bf16-bf16red")
check "--grad-reduce-in-bf16: the reduce-scatter moves half the bytes ($b16 MB against $f32 MB)" \
    awk -v a="$f32" -v b="$b16" 'BEGIN { exit !(a > 0 && b * 2 == a) }'
check "--grad-reduce-in-bf16: a bf16 gradient buffer in the memory plan" \
    bash -c "grep -q 'gradients (bf16)' '$MC_TMP/bf16-bf16red' && grep -q 'gradients (fp32)' '$MC_TMP/bf16-fp32red'"
# bf16 keeps 8 significant bits: each reduced gradient is within 2^-8 (relative) of the fp32 one,
# so the lm loss stays within 1e-3 and the grad norm within 1e-2 (relative) over these iterations
log_numbers "$MC_TMP/bf16-fp32red" >"$MC_TMP/n32"
log_numbers "$MC_TMP/bf16-bf16red" >"$MC_TMP/n16"
check "--grad-reduce-in-bf16: lm loss within 1e-3 and grad norm within 1e-2 of the fp32 reduction, and not the same numbers" \
    awk 'function rel(a, b) { d = a - b; if (d < 0) d = -d; return d / (a < 0 ? -a : a) }
         NR == FNR { l[FNR] = $1; g[FNR] = $2; next }
         { n++; if (rel(l[FNR], $1) > 1e-3 || rel(g[FNR], $2) > 1e-2) bad++; if (l[FNR] != $1 || g[FNR] != $2) differ++ }
         END { exit !(n == 8 && !bad && differ) }' "$MC_TMP/n32" "$MC_TMP/n16"

# ---- bf16 with 2 instances: Megatron's calc_params_l2_norm sums the sharded fp32 main params
# over the whole dp-cp group, which holds each twice: the params norm is sqrt(2) times the one of
# one instance, the losses and grad norms are the same ----
run_np 2 "${B[@]}" "${I2[@]}" >"$MC_TMP/bf16-i2" 2>&1
log_numbers "$MC_TMP/bf16-i2" >"$MC_TMP/ni2"
check "bf16, 2 instances: the losses and grad norms of one instance, the params norm sqrt(2) times Megatron's way" \
    awk 'function rel(a, b) { d = a - b; if (d < 0) d = -d; return d / (a < 0 ? -a : a) }
         NR == FNR { l[FNR] = $1; g[FNR] = $2; p[FNR] = $3; next }
         { n++; if (rel(l[FNR], $1) > 1e-5 || rel(g[FNR], $2) > 1e-4 || rel(p[FNR] * sqrt(2), $3) > 2e-4) bad++ }
         END { exit !(n == 8 && !bad) }' "$MC_TMP/n32" "$MC_TMP/ni2"

# ---- expert parallelism: ep 2 at dp 4 (edp 2), 2 instances: the expert buckets reduce-scattered
# within the instance's edp / 2 ranks and all-reduced across, the dense ones as above ----
MOE=(--num-layers 2 --normalization RMSNorm --swiglu --disable-bias-linear
     --untie-embeddings-and-output-weights --num-experts 4 --moe-ffn-hidden-size 16
     --moe-router-topk 2 --moe-router-load-balancing-type aux_loss --moe-aux-loss-coeff 1e-2
     --moe-token-dispatcher-type alltoall)
run_np 1 "${MOE[@]}" >"$MC_TMP/moe1" 2>&1
run_np 4 "${MOE[@]}" --expert-model-parallel-size 2 "${I2[@]}" --overlap-grad-reduce \
    --ddp-bucket-size 500 >"$MC_TMP/moe-i2" 2>"$MC_TMP/moe-i2.err"
check "MoE, ep 2 at dp 4 with 2 instances gives the single-rank numbers" \
    same_log_numbers "$MC_TMP/moe1" "$MC_TMP/moe-i2" 8
