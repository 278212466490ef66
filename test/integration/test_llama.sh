#!/usr/bin/env bash
# The Llama block in every layout: a model with grouped-query attention, SwiGLU,
# rotary embeddings, RMSNorm and untied embeddings, with dropout on, gives the single-rank
# losses, grad norms and params norms over 20 iterations under tp (with and without sequence
# parallelism), pp with 1F1B and the interleaved schedule, dp with the distributed optimizer and
# overlaps, PTD-P, full and selective recomputation, in fp32 (to 1e-5) and bf16; query groups
# that tp does not divide are refused as Megatron does; PTD-P under srun too, where Slurm is up.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/mpi.sh"

LLAMA=(--position-embedding-type rope --normalization RMSNorm --swiglu --group-query-attention
       --num-query-groups 2 --untie-embeddings-and-output-weights --disable-bias-linear)
FLAGS=(--device cpu --mock-data --vocab-size 256 --make-vocab-size-divisible-by 64 --num-layers 4
       --hidden-size 32 --num-attention-heads 4 --ffn-hidden-size 48 --seq-length 32
       --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --train-iters 20
       --lr 3e-3 --lr-decay-style cosine --lr-warmup-iters 3 --min-lr 1e-4 --weight-decay 0.1
       --clip-grad 1.0 --log-interval 1 --eval-interval 10 --eval-iters 2 --seed 1234
       --hidden-dropout 0.1 --attention-dropout 0.1 --log-params-norm "${LLAMA[@]}")

"$MC_BIN" "${FLAGS[@]}" >"$MC_TMP/single" 2>"$MC_TMP/single.err"
rc=$?
check "single-rank Llama run (exit 0; rc=$rc $(tail -c 300 "$MC_TMP/single.err"))" test $rc -eq 0
# 256x32 word embeddings and output layer, 4 x (RMSNorm 32 + qkv (4 + 2x2) x 8 x 32 + proj 32x32 +
# RMSNorm 32 + fc1 [gate; up] 96x32 + fc2 32x48), final RMSNorm 32; no position embeddings
check "the Llama model has Megatron's 47392 parameters" \
    grep -q 'number of parameters on (tensor, pipeline) model parallel rank (0, 0): 47392$' "$MC_TMP/single"

"$MC_BIN" "${FLAGS[@]}" --recompute-granularity full --recompute-method uniform \
    --recompute-num-layers 2 >"$MC_TMP/full" 2>&1
check "full recomputation gives the same numbers" same_log_numbers "$MC_TMP/single" "$MC_TMP/full" 20
"$MC_BIN" "${FLAGS[@]}" --recompute-activations >"$MC_TMP/sel" 2>&1
check "selective recomputation gives the same numbers" same_log_numbers "$MC_TMP/single" "$MC_TMP/sel" 20

# a model without GQA is another model: the comparison can fail
"$MC_BIN" "${FLAGS[@]}" --num-query-groups 4 >"$MC_TMP/mha" 2>&1
if same_log_numbers "$MC_TMP/single" "$MC_TMP/mha" 20; then
    not_ok "the comparison can fail (4 query groups are not the reference's 2)"
else
    ok "the comparison can fail (4 query groups are not the reference's 2)"
fi

# make demo-llama's model, shortened: on the shared Shakespeare dataset the loss falls
SHARED=${MEGATRON_C_SHARED:-../shared}
DATA=$SHARED/data/megatron-ref/tinyshakespeare_text_document
if [ -f "$DATA.bin" ]; then
    "$MC_BIN" --device cpu --data-cache-path "$MC_TMP/cache" --data-path "$DATA" --split 949,50,1 --tokenizer-type GPT2BPETokenizer \
        --vocab-file "$SHARED/data/gpt2/gpt2-vocab.json" --merge-file "$SHARED/data/gpt2/gpt2-merges.txt" \
        --num-layers 2 --hidden-size 64 --num-attention-heads 4 --group-query-attention \
        --num-query-groups 2 --swiglu --position-embedding-type rope --normalization RMSNorm \
        --untie-embeddings-and-output-weights --disable-bias-linear --seq-length 64 \
        --max-position-embeddings 64 --micro-batch-size 4 --global-batch-size 8 --train-iters 30 \
        --lr 3e-3 --lr-warmup-iters 3 --hidden-dropout 0 --attention-dropout 0 --log-interval 1 \
        --eval-iters 0 >"$MC_TMP/shakespeare" 2>&1
    check "a small Llama's loss falls on Shakespeare (iteration 1 to 30)" bash -c "
        sed -nE 's/.*iteration +([0-9]+)\/.*lm loss: ([0-9.E+-]+) .*/\1 \2/p' '$MC_TMP/shakespeare' |
        awk '\$1 == 1 { a = \$2 } \$1 == 30 { b = \$2 } END { exit !(a > 0 && b > 0 && b < a - 1.0) }'"
else
    skip "a small Llama on Shakespeare" "no shared data ($DATA.bin)"
fi

if ! have_mpirun; then
    skip "Llama layouts" "mpirun is not installed (scripts/install-deps.sh installs OpenMPI)"
    exit 0
fi
# layout_equals with 20 iterations
lay() { # name np flags...
    local name=$1 np=$2
    shift 2
    mpirun_mc "$np" "${FLAGS[@]}" "$@" >"$MC_TMP/run" 2>"$MC_TMP/run.err"
    local rc=$?
    if [ $rc -ne 0 ]; then
        not_ok "$name exits 0 (rc=$rc: $(tail -c 400 "$MC_TMP/run.err"))"
        return
    fi
    check "$name gives the single-rank numbers" same_log_numbers "${REF:-$MC_TMP/single}" "$MC_TMP/run" 20
}
VPP=(--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1)
lay "Llama tp=2" 2 --tensor-model-parallel-size 2
lay "Llama tp=2, sequence parallel" 2 --tensor-model-parallel-size 2 --sequence-parallel
lay "Llama pp=2 (1F1B)" 2 --pipeline-model-parallel-size 2
lay "Llama pp=2 x vpp=2 (interleaved)" 2 "${VPP[@]}"
lay "Llama dp=2, distributed optimizer, overlapped grad reduce and param gather" 2 \
    --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 2000
PTDP=(--tensor-model-parallel-size 2 "${VPP[@]}" --sequence-parallel --use-distributed-optimizer
      --overlap-grad-reduce --ddp-bucket-size 3000 --recompute-activations)
lay "Llama PTD-P tp=2 x pp=2 x dp=2, vpp=2, sequence parallel, selective recomputation" 8 "${PTDP[@]}"
# --qk-layernorm: each tp rank normalises its own heads, so q/k_layernorm's gradients are summed
# over tp (Megatron's _allreduce_layernorm_grads), with or without sequence parallelism
for norm in RMSNorm LayerNorm; do
    QK=(--qk-layernorm --normalization "$norm")
    "$MC_BIN" "${FLAGS[@]}" "${QK[@]}" >"$MC_TMP/qk-$norm" 2>&1
    check "Llama --qk-layernorm ($norm) run (exit 0)" test $? -eq 0
    REF=$MC_TMP/qk-$norm lay "Llama --qk-layernorm ($norm) tp=2" 2 "${QK[@]}" --tensor-model-parallel-size 2
done
REF=$MC_TMP/qk-RMSNorm lay "Llama --qk-layernorm PTD-P" 8 --qk-layernorm "${PTDP[@]}"
if same_log_numbers "$MC_TMP/single" "$MC_TMP/qk-RMSNorm" 20; then
    not_ok "the q/k layernorm changes the numbers"
else
    ok "the q/k layernorm changes the numbers"
fi
"$MC_BIN" "${FLAGS[@]}" --qk-layernorm --apply-wd-to-qk-layernorm >"$MC_TMP/qk-wd" 2>&1
if same_log_numbers "$MC_TMP/qk-RMSNorm" "$MC_TMP/qk-wd" 20; then
    not_ok "--apply-wd-to-qk-layernorm decays the q/k layernorm weights (the numbers change)"
else
    ok "--apply-wd-to-qk-layernorm decays the q/k layernorm weights (the numbers change)"
fi
if have_srun; then
    "${SRUN[@]}" -n 8 "$MC_BIN" "${FLAGS[@]}" "${PTDP[@]}" >"$MC_TMP/srun" 2>"$MC_TMP/srun.err"
    rc=$?
    check "Llama PTD-P under srun --mpi=pmix -n 8 exits 0 (rc=$rc)" test $rc -eq 0
    check "Llama PTD-P under srun gives the single-rank numbers" same_log_numbers "$MC_TMP/single" "$MC_TMP/srun" 20
else
    skip "Llama PTD-P under srun --mpi=pmix -n 8" "no Slurm here ($(srun_why))"
fi

# Megatron needs whole query groups on each tp rank
mpirun_mc 4 "${FLAGS[@]}" --tensor-model-parallel-size 4 >"$MC_TMP/g" 2>"$MC_TMP/g.err"
rc=$?
check "2 query groups over tp 4 are refused once (rc=$rc)" bash -c "[ $rc -eq 2 ] && [ \$(grep -c 'megatron-c: error: --num-query-groups (2) must be divisible by --tensor-model-parallel-size (4)' '$MC_TMP/g.err') -eq 1 ]"

# bf16: the untied pipeline changes no sum (exact); tp and dp sum in another order (1e-3)
"$MC_BIN" "${FLAGS[@]}" --bf16 >"$MC_TMP/bf16" 2>&1
check "bf16 Llama run (exit 0)" test $? -eq 0
mpirun_mc 2 "${FLAGS[@]}" --bf16 "${VPP[@]}" >"$MC_TMP/bf16-pp" 2>&1
check "bf16 Llama pp=2 x vpp=2 gives the single-rank numbers" same_log_numbers "$MC_TMP/bf16" "$MC_TMP/bf16-pp" 20
near() { # ref run
    paste -d' ' <(log_numbers "$1") <(log_numbers "$2") | awk '
        function rel(a, b) { d = a - b; if (d < 0) d = -d; return d / (a < 0 ? -a : a) }
        NF != 6 { bad++; next } $1 ~ /^val/ { if (rel($2, $5) > 1e-3) bad++; n++; next }
        { n++; if (rel($1, $4) > 1e-3 || rel($2, $5) > 2e-2 || rel($3, $6) > 1e-3) bad++ }
        END { exit !(n >= 20 && bad == 0) }'
}
mpirun_mc 4 "${FLAGS[@]}" --bf16 --tensor-model-parallel-size 2 --sequence-parallel \
    --use-distributed-optimizer >"$MC_TMP/bf16-tp" 2>&1
check "bf16 Llama tp=2 x dp=2, sequence parallel, distributed optimizer tracks it within 1e-3" \
    near "$MC_TMP/bf16" "$MC_TMP/bf16-tp"
"$MC_BIN" "${FLAGS[@]}" --fp16 --loss-scale 1024 >"$MC_TMP/fp16" 2>&1
tracks_loss() { # ref run: every lm loss within 2%
    paste -d' ' <(log_numbers "$1") <(log_numbers "$2") | awk '
        NF == 6 && $1 !~ /^val/ { n++; d = $1 - $4; if (d < 0) d = -d; if (d / $1 > 0.02) bad++ }
        END { exit !(n >= 20 && bad == 0) }'
}
check "fp16 Llama run with a constant loss scale tracks bf16's loss within 2%" \
    tracks_loss "$MC_TMP/bf16" "$MC_TMP/fp16"

# Checkpoints carry the Llama model: a tp 1 save at iteration 10 converted to tp 2 (fc1's
# [gate; up] halves and GQA's groups resharded) resumes with the single-rank numbers, and
# --use-checkpoint-args brings back every model flag (rope, RMSNorm, SwiGLU, GQA, untied, biases);
# the model has q/k layernorms too
"$MC_BIN" "${FLAGS[@]}" --qk-layernorm --save "$MC_TMP/ck" --save-interval 10 --exit-interval 10 >"$MC_TMP/saving" 2>&1
check "the Llama run saves (exit 0)" test $? -eq 0
# (iteration 12 left out: Megatron main's line after the first iteration of a run counts both)
RESUMED=' iteration +(11|1[3-9]|20)/|validation loss at iteration 20 '
grep -E "$RESUMED" "$MC_TMP/qk-RMSNorm" >"$MC_TMP/tail"
"$MC_BIN" convert-checkpoint --load-dir "$MC_TMP/ck" --save-dir "$MC_TMP/ck2" \
    --target-tensor-parallel-size 2 >"$MC_TMP/conv" 2>&1
rc=$?
check "convert-checkpoint of the Llama model to tp 2 (rc=$rc: $(tail -c 300 "$MC_TMP/conv"))" test $rc -eq 0
mpirun_mc 2 "${FLAGS[@]}" --qk-layernorm --tensor-model-parallel-size 2 --load "$MC_TMP/ck2" >"$MC_TMP/res2" 2>"$MC_TMP/res2.err"
grep -E "$RESUMED" "$MC_TMP/res2" >"$MC_TMP/res2.cmp"
check "tp 2 resumed from the converted checkpoint gives the single-rank iterations 11-20" \
    same_log_numbers "$MC_TMP/tail" "$MC_TMP/res2.cmp" 9
BASE=()
skip_next=0
for f in "${FLAGS[@]}"; do # FLAGS without the model's (what --use-checkpoint-args supplies)
    case $f in
    --position-embedding-type | --normalization | --num-query-groups | --hidden-size | --num-layers | \
        --num-attention-heads | --ffn-hidden-size | --max-position-embeddings) skip_next=1; continue ;;
    --swiglu | --group-query-attention | --untie-embeddings-and-output-weights | --disable-bias-linear) continue ;;
    esac
    [ $skip_next -eq 1 ] && { skip_next=0; continue; }
    BASE+=("$f")
done
# (Megatron's load_args_from_checkpoint does not take qk_layernorm: it is passed again)
"$MC_BIN" "${BASE[@]}" --qk-layernorm --use-checkpoint-args --load "$MC_TMP/ck" >"$MC_TMP/res1" 2>"$MC_TMP/res1.err"
rc=$?
grep -E "$RESUMED" "$MC_TMP/res1" >"$MC_TMP/res1.cmp"
check "--use-checkpoint-args takes the Llama model from the checkpoint (rc=$rc $(tail -c 300 "$MC_TMP/res1.err"))" \
    same_log_numbers "$MC_TMP/tail" "$MC_TMP/res1.cmp" 9
