#!/usr/bin/env bash
# Context parallelism (issue 32): every sequence in 2cp chunks, rank r holding chunks r and
# 2cp-1-r. With dropout on, the GPT block and the Llama block (grouped-query attention, RoPE,
# RMSNorm, SwiGLU) give the single-rank losses, grad norms and params norms over 24 iterations
# (same_log_numbers: 1e-5) with each --cp-comm-type (p2p, a2a, all_gather, a2a+p2p): the Llama
# block at cp 2 and 4, the GPT block at cp 2 and at cp 4 with one type per layer; cp 2 with tp 2
# and sequence parallelism, with pp 2 and the interleaved schedule, with dp 2 and the
# distributed optimizer, with recomputation, under mpirun and (where Slurm is up) srun; cp 2 on
# the emulated CUDA device (the project's block kernels, and cuDNN's fused attention in bf16 with
# p2p, all_gather and a2a).
# Megatron's and Transformer Engine's refusals are one line, exit 2.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

if ! have_mpirun; then
    skip "context-parallel equivalence" "mpirun is not installed (scripts/install-deps.sh installs OpenMPI)"
    exit 0
fi

# head dim 8 (a multiple of 8: Transformer Engine's a2a and all-gather want it); 4 heads split
# over cp 4 for a2a
GPT=(--device cpu --mock-data --vocab-size 256 --make-vocab-size-divisible-by 64 --num-layers 4
     --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
     --micro-batch-size 2 --global-batch-size 8 --train-iters 24 --lr 3e-3
     --lr-decay-style cosine --lr-warmup-iters 3 --min-lr 1e-4 --weight-decay 0.1
     --clip-grad 1.0 --log-interval 1 --eval-interval 12 --eval-iters 2 --seed 1234
     --hidden-dropout 0.1 --attention-dropout 0.1 --log-params-norm)
# 8 heads in 4 query groups: a2a over 4 ranks (and over 2 with tp 2) keeps whole groups
LLAMA=("${GPT[@]}" --position-embedding-type rope --normalization RMSNorm --swiglu
       --group-query-attention --num-query-groups 4 --untie-embeddings-and-output-weights
       --disable-bias-linear --hidden-size 64 --num-attention-heads 8 --ffn-hidden-size 96)
HCP=(--hierarchical-context-parallel-sizes 2 2)

FLAGS=("${GPT[@]}")
"$MC_BIN" "${FLAGS[@]}" >"$MC_TMP/gpt" 2>"$MC_TMP/gpt.err"
check "single-rank GPT reference run (exit 0)" test $? -eq 0
for t in p2p a2a all_gather; do
    layout_equals "GPT cp=2 $t" "$MC_TMP/gpt" 2 --context-parallel-size 2 --cp-comm-type $t
done
# cp 4 with the GPT block: each type in one run, a layer each (the Llama block below runs each
# type at cp 4 on every layer)
layout_equals "GPT cp=4, one comm type per layer (p2p a2a all_gather a2a+p2p)" "$MC_TMP/gpt" 4 \
    --context-parallel-size 4 --cp-comm-type p2p a2a all_gather a2a+p2p "${HCP[@]}"
check "cp x dp world logged" grep -q 'using world size: 4, data-parallel size: 1, context-parallel size: 4,' "$MC_TMP/run"
layout_equals "GPT cp=2 x tp=2, sequence parallel" "$MC_TMP/gpt" 4 --context-parallel-size 2 \
    --tensor-model-parallel-size 2 --sequence-parallel
layout_equals "GPT cp=2 x pp=2, interleaved (vpp 2)" "$MC_TMP/gpt" 4 --context-parallel-size 2 \
    --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1
layout_equals "GPT cp=2 x dp=2, distributed optimizer, overlaps" "$MC_TMP/gpt" 4 --context-parallel-size 2 \
    --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 2000
layout_equals "GPT cp=2 a2a, selective recomputation" "$MC_TMP/gpt" 2 --context-parallel-size 2 \
    --cp-comm-type a2a --recompute-activations
layout_equals "GPT cp=2 p2p, full recomputation" "$MC_TMP/gpt" 2 --context-parallel-size 2 \
    --recompute-granularity full --recompute-method uniform --recompute-num-layers 2

FLAGS=("${LLAMA[@]}")
"$MC_BIN" "${FLAGS[@]}" >"$MC_TMP/llama" 2>"$MC_TMP/llama.err"
check "single-rank Llama reference run (exit 0)" test $? -eq 0
for t in p2p a2a all_gather; do
    layout_equals "Llama cp=2 $t" "$MC_TMP/llama" 2 --context-parallel-size 2 --cp-comm-type $t
    layout_equals "Llama cp=4 $t" "$MC_TMP/llama" 4 --context-parallel-size 4 --cp-comm-type $t
done
layout_equals "Llama cp=4 a2a+p2p (2 x 2)" "$MC_TMP/llama" 4 --context-parallel-size 4 --cp-comm-type a2a+p2p "${HCP[@]}"
layout_equals "Llama cp=2 x tp=2, sequence parallel, a2a" "$MC_TMP/llama" 4 --context-parallel-size 2 \
    --tensor-model-parallel-size 2 --sequence-parallel --cp-comm-type a2a
layout_equals "Llama cp=2 x pp=2, interleaved (vpp 2)" "$MC_TMP/llama" 4 --context-parallel-size 2 \
    --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1
layout_equals "Llama cp=2 x dp=2, distributed optimizer" "$MC_TMP/llama" 4 --context-parallel-size 2 \
    --use-distributed-optimizer --overlap-grad-reduce

# the same under srun, where the one-node Slurm of slurm-up.sh runs: every comm type (one a
# layer) at cp 4, tp 2 with sequence parallelism, and pp 2 (interleaved) with dp 2 and the
# distributed optimizer on 8 ranks
why=$(srun_why)
if [ -n "$why" ]; then
    skip "cp=4 with every comm type, cp=2 x tp=2, cp=2 x pp=2 x dp=2 under srun" "$why"
else
    FLAGS=("${GPT[@]}")
    "${SRUN[@]}" -n 4 "$MC_BIN" "${FLAGS[@]}" --context-parallel-size 4 \
        --cp-comm-type p2p a2a all_gather a2a+p2p "${HCP[@]}" >"$MC_TMP/srun" 2>"$MC_TMP/srun.err"
    check "srun: GPT cp=4, one comm type per layer, gives the single-rank numbers" same_log_numbers "$MC_TMP/gpt" "$MC_TMP/srun"
    "${SRUN[@]}" -n 8 "$MC_BIN" "${FLAGS[@]}" --context-parallel-size 2 --pipeline-model-parallel-size 2 \
        --num-layers-per-virtual-pipeline-stage 1 --use-distributed-optimizer --overlap-grad-reduce \
        >"$MC_TMP/srun" 2>"$MC_TMP/srun.err"
    check "srun: GPT cp=2 x pp=2 (vpp 2) x dp=2, distributed optimizer, gives the single-rank numbers" \
        same_log_numbers "$MC_TMP/gpt" "$MC_TMP/srun"
    FLAGS=("${LLAMA[@]}")
    "${SRUN[@]}" -n 4 "$MC_BIN" "${FLAGS[@]}" --context-parallel-size 2 --tensor-model-parallel-size 2 \
        --sequence-parallel >"$MC_TMP/srun" 2>"$MC_TMP/srun.err"
    check "srun: Llama cp=2 x tp=2 p2p gives the single-rank numbers" same_log_numbers "$MC_TMP/llama" "$MC_TMP/srun"
fi

# cp 2 on the emulated CUDA device (test/emu): the ring on the CUDA block kernels, two ranks on one
# device staging through MPI, gives the CPU's single-rank numbers (about 40 s)
if [ -z "${MC_EMU_BUILD:-}" ] || [ ! -x "$MC_EMU_BUILD/megatron-c" ]; then
    skip "cp=2 on the emulated CUDA device" "no emulated build (MC_EMU_BUILD='${MC_EMU_BUILD:-}'; make emu)"
else
    FLAGS=("${GPT[@]}" --num-layers 2 --train-iters 20 --eval-interval 10)
    "$MC_BIN" "${FLAGS[@]}" >"$MC_TMP/emu-ref" 2>&1
    FLAGS=("${FLAGS[@]/#cpu/cuda}")
    "${MPIRUN[@]}" -np 2 "$MC_EMU_BUILD/megatron-c" "${FLAGS[@]}" --distributed-backend mpi \
        --context-parallel-size 2 >"$MC_TMP/emu" 2>"$MC_TMP/emu.err"
    rc=$?
    name="cp=2 p2p on the emulated CUDA device gives the CPU's single-rank numbers"
    if [ $rc -eq 0 ] && grep -q '^> device: cuda' "$MC_TMP/emu" && same_log_numbers "$MC_TMP/emu-ref" "$MC_TMP/emu" 20; then
        ok "$name"
    else
        not_ok "$name (rc=$rc: $(tail -c 300 "$MC_TMP/emu.err"))"
    fi
fi

# cp 2 on the emulated device with cuDNN's fused attention (--attention-backend flash, bf16,
# attention dropout 0), each comm type: p2p's ring blocks (causal diagonals, unmasked others, the
# statistics merged), all_gather's blocks (a query chunk against its prefix, causal aligned
# bottom-right), a2a's whole-sequence attention of half the heads, all on the emulated cuDNN (the
# profile shows none of the project's attention kernels), give the CPU's single-rank bf16 lm
# losses within 1e-4 relative (cuDNN rounds each block's output and gradients to bf16 before the
# fp32 merge and sums; the runs differ by about 3e-5; a causal mask left off the diagonal, aligned
# top-left, or the statistics of another layout move them by percents). 8 iterations, 2 layers
# (about 12 s each).
if [ -n "${MC_EMU_BUILD:-}" ] && [ -x "$MC_EMU_BUILD/megatron-c" ]; then
    FLAGS=("${GPT[@]}" --num-layers 2 --train-iters 8 --eval-interval 4 --attention-dropout 0 --bf16)
    "$MC_BIN" "${FLAGS[@]}" >"$MC_TMP/dnn-ref" 2>&1
    FLAGS=("${FLAGS[@]/#cpu/cuda}")
    losses() { grep -oE 'lm loss( value)?: [0-9.E+-]+' "$1" | awk '{print $NF}'; }
    for type in p2p all_gather a2a; do
        "${MPIRUN[@]}" -x MC_EMU_PROFILE=1 -np 2 "$MC_EMU_BUILD/megatron-c" "${FLAGS[@]}" \
            --distributed-backend mpi --context-parallel-size 2 --cp-comm-type $type \
            --attention-backend flash >"$MC_TMP/dnn" 2>"$MC_TMP/dnn.err"
        rc=$?
        name="cp=2 $type with cuDNN's attention on the emulated device gives the CPU's bf16 losses within 1e-4"
        if [ $rc -eq 0 ] && grep -q "^> attention: cuDNN .* on context parallelism's attention" "$MC_TMP/dnn" &&
            grep -q 'cuda-emu: profile' "$MC_TMP/dnn.err" &&
            ! grep -qE 'cuda-emu: .* (k_block_(fwd|dq|dkv|delta)|att_[a-z_]*kernel)' "$MC_TMP/dnn.err" &&
            paste -d' ' <(losses "$MC_TMP/dnn-ref") <(losses "$MC_TMP/dnn") | awk '
                function rel(a, b) { d = a - b; if (d < 0) d = -d; return d / (a < 0 ? -a : a) }
                NF != 2 || rel($1, $2) > 1e-4 { bad++ } { n++ } END { exit !(n >= 12 && bad == 0) }'; then
            ok "$name"
        else
            not_ok "$name (rc=$rc: $(grep '^> attention' "$MC_TMP/dnn"; grep -E 'k_block_|att_' "$MC_TMP/dnn.err" | head -3; tail -c 300 "$MC_TMP/dnn.err"))"
        fi
    done
fi

# the comparison can fail: attention dropout keyed by other positions is another model
"$MC_BIN" "${GPT[@]}" --attention-dropout 0.11 >"$MC_TMP/other" 2>&1
if same_log_numbers "$MC_TMP/gpt" "$MC_TMP/other"; then
    not_ok "the comparison can fail (attention dropout 0.11 is not the reference's 0.1)"
else
    ok "the comparison can fail (attention dropout 0.11 is not the reference's 0.1)"
fi

# Megatron's and Transformer Engine's refusals: one line naming the flags, exit 2, on every rank
refused() { # name pattern np flags...
    local name=$1 pattern=$2 np=$3
    shift 3
    mpirun_mc "$np" "${GPT[@]}" "$@" >"$MC_TMP/bad" 2>"$MC_TMP/bad.err"
    local rc=$?
    if [ $rc -eq 2 ] && [ "$(grep -c '^megatron-c: error: ' "$MC_TMP/bad.err")" -eq 1 ] &&
        grep -qE -- "$pattern" "$MC_TMP/bad.err" && [ ! -s "$MC_TMP/bad" ]; then
        ok "$name"
    else
        not_ok "$name (rc=$rc: $(head -c 400 "$MC_TMP/bad.err"))"
    fi
}
refused "a sequence 2cp does not divide" '--seq-length \(36\) must be a multiple of 2 x --context-parallel-size \(4\)' \
    4 --context-parallel-size 4 --seq-length 36 --max-position-embeddings 36
refused "a2a with heads cp does not divide" '--cp-comm-type a2a scatters heads over 4 ranks' \
    4 --context-parallel-size 4 --cp-comm-type a2a --num-attention-heads 2 --kv-channels 16
refused "a2a with query groups cp does not divide" 'attention heads \(4\) and query groups \(2\)' \
    4 --context-parallel-size 4 --cp-comm-type a2a --group-query-attention --num-query-groups 2
refused "all_gather with a head dim that is not a multiple of 8" '--cp-comm-type all_gather needs --kv-channels \(4\)' \
    2 --context-parallel-size 2 --cp-comm-type allgather --num-attention-heads 8
refused "a2a+p2p without hierarchical sizes" '--hierarchical-context-parallel-sizes must be set when a2a\+p2p' \
    4 --context-parallel-size 4 --cp-comm-type a2a+p2p
refused "hierarchical sizes whose product is not cp" 'product of --hierarchical-context-parallel-sizes \(6\) must equal --context-parallel-size \(4\)' \
    4 --context-parallel-size 4 --hierarchical-context-parallel-sizes 2 3
refused "one comm type per layer, but not for every layer" '--cp-comm-type lists 2 types: give one, or one per layer \(--num-layers 4\)' \
    2 --context-parallel-size 2 --cp-comm-type p2p a2a
refused "an unknown comm type" '--cp-comm-type ring is not a communication type' \
    2 --context-parallel-size 2 --cp-comm-type ring
refused "--reset-attention-mask (Transformer Engine takes no arbitrary mask with cp)" '--reset-attention-mask is not supported with --context-parallel-size > 1' \
    2 --context-parallel-size 2 --reset-attention-mask
refused "Megatron's local attention" 'drop --transformer-impl local' \
    2 --context-parallel-size 2 --transformer-impl local
refused "sequence parallelism on a cp-local sequence tp does not divide" '--seq-length / --context-parallel-size \(10\) must be divisible by --tensor-model-parallel-size \(4\)' \
    8 --context-parallel-size 2 --tensor-model-parallel-size 4 --sequence-parallel --seq-length 20 \
    --max-position-embeddings 20

# ---- megatron-c plan: memory and the cp traffic as runs have them ----
M=(--device cpu --cpu-threads 1 --mock-data --num-layers 4 --hidden-size 64 --num-attention-heads 4
   --seq-length 32 --max-position-embeddings 32 --vocab-size 512 --micro-batch-size 2
   --global-batch-size 8 --train-iters 1 --lr 1e-4 --log-interval 1 --eval-iters 0
   --timing-log-level 1)
memory_block() { awk '/^> memory plan/ { on = 1 } on { print } on && /^    total/ { exit }' "$1"; }
counted_cp() { # the cp groups' rows of the run's "communication per iteration" block: calls MB
    awk '/^communication per iteration/ { c = 0; mb = 0 } $1 ~ /^cp(-a2a|-p2p)?$/ { gsub(/[(),:]/, " "); c += $(NF - 1); mb += $NF } END { printf "%d %.4f\n", c, mb }' "$1"
}
plan_case() { # np name flags...
    local np=$1 name=$2
    shift 2
    mpirun_mc "$np" "${M[@]}" "$@" >"$MC_TMP/prun" 2>&1
    "$MC_BIN" plan --num-gpus "$np" "${M[@]}" "$@" >"$MC_TMP/plan" 2>&1
    memory_block "$MC_TMP/prun" >"$MC_TMP/m.run"
    memory_block "$MC_TMP/plan" >"$MC_TMP/m.plan"
    check "plan, $name: the memory plan is the run's ($(tail -1 "$MC_TMP/m.run"))" \
        bash -c "[ -s '$MC_TMP/m.run' ] && cmp -s '$MC_TMP/m.run' '$MC_TMP/m.plan'"
    read -r calls mb <<<"$(counted_cp "$MC_TMP/prun")"
    read -r pcalls pbytes <<<"$(sed -nE 's/.*context-parallel attention .* ([0-9]+) calls, ([0-9]+) bytes per GPU/\1 \2/p' "$MC_TMP/plan")"
    check "plan, $name: cp traffic as the run counts it ($calls calls, $mb MB) = predicted (${pcalls:-?}, ${pbytes:-?} bytes)" \
        awk -v c="$calls" -v m="$mb" -v pc="${pcalls:-0}" -v pb="${pbytes:-0}" \
        'BEGIN { exit !(c == pc && c > 0 && pb / 1e6 - m < 0.0002 && m - pb / 1e6 < 0.0002) }'
}
plan_case 2 "cp 2 p2p" --context-parallel-size 2
plan_case 4 "cp 4 p2p, selective recomputation" --context-parallel-size 4 --recompute-activations
plan_case 4 "cp 4 a2a, bf16" --context-parallel-size 4 --cp-comm-type a2a --bf16
plan_case 4 "cp 2 x tp 2 all_gather, full recomputation" --context-parallel-size 2 --tensor-model-parallel-size 2 \
    --cp-comm-type all_gather --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
plan_case 4 "cp 4 a2a+p2p" --context-parallel-size 4 --cp-comm-type a2a+p2p "${HCP[@]}"
act() { # MiB
    awk '/activations \(1 microbatch/ { v = $(NF - 1); if ($NF == "GiB") v *= 1024; if ($NF == "KiB") v /= 1024; print v; exit }' "$1"
}
"$MC_BIN" plan --num-gpus 1 "${M[@]}" --seq-length 8192 --max-position-embeddings 8192 >"$MC_TMP/p1" 2>&1
"$MC_BIN" plan --num-gpus 4 "${M[@]}" --seq-length 8192 --max-position-embeddings 8192 --context-parallel-size 4 >"$MC_TMP/p4" 2>&1
check "plan: activations per rank at cp 4 ($(act "$MC_TMP/p4") MiB) are at most a third of cp 1's ($(act "$MC_TMP/p1") MiB)" \
    awk -v a="$(act "$MC_TMP/p1")" -v b="$(act "$MC_TMP/p4")" 'BEGIN { exit !(b > 0 && 3 * b <= a) }'
# --attention-kernel kernels: a context-parallel run's attention is the project's block kernels
# (cuDNN runs cp's attention only where it is the choice); with cuDNN's speed assumed, tp 2 + SP wins at 64k instead.
"$MC_BIN" plan --num-gpus 8 --gpu h100 --attention-kernel kernels --search --search-top 3 --num-layers 24 --hidden-size 2048 \
    --num-attention-heads 16 --seq-length 65536 --max-position-embeddings 65536 --micro-batch-size 1 \
    --global-batch-size 8 --train-iters 10 --lr 1e-4 --mock-data --vocab-size 50257 --bf16 >"$MC_TMP/search" 2>&1
check "plan --search: a 64k-token sequence on 8 H100 ranks a context-parallel layout among the best three" \
    grep -qE '^ +[123] .*--context-parallel-size [248]' "$MC_TMP/search"
